"""What each ``kubectl kueue`` command does against the API server, as kueuectl does it.

Sources (kubernetes-sigs/kueue, cmd/kueuectl/app/): create/*.go, list/*.go (columns in the
``*_printer.go`` files), stop/*.go, resume/*.go, options/update_workload_activation_options.go,
delete/delete_workload.go, version/version.go. Each command takes an open :class:`Cluster`, its parsed
arguments and the output streams, and returns the exit code; failures raise :class:`Failure`.
"""

from __future__ import annotations

import argparse
import copy
import urllib.parse
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import IO, Any

from kueue_es.jobframework import integrations
from kueue_es.kueuectl import positions, printing, specs
from kueue_es.kueuectl.connect import MERGE_PATCH, TABLE, Cluster, Failure
from kueue_es.services.kube import resources

KUEUE = resources.KUEUE_V1BETA2
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # Kueue's constants.JobUIDLabel
CRD_TYPE_MAX_LENGTH = 20  # list_workload_printer.go: longer JOB TYPEs are cut and end in "..."
WORKLOAD_STATUSES = ("all", "pending", "quotareserved", "admitted", "finished")
#: The label selecting a job's pods (each integration's PodLabelSelector in Kueue's jobframework).
#: A batch/v1 Job's; the integrations' are theirs (Integration.pod_label_selector).
POD_SELECTORS = {("batch", "Job"): "batch.kubernetes.io/job-name"}
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"


def _path(ref: resources.ResourceRef, *, namespace: str | None = None, name: str | None = None) -> str:
    return ref.path(namespace=namespace, name=name)


def _dry_run_query(dry_run: str) -> list[tuple[str, str]]:
    return [("dryRun", "All")] if dry_run == "server" else []


def check_dry_run(value: str) -> str:
    """kueuectl's ``--dry-run`` values; raises Failure with its message for another."""
    if value not in ("none", "client", "server"):
        raise Failure(f'invalid dry-run value ({value}). Must be "none", "server", or "client"')
    return value


def _no_resources(err: IO[str], namespace: str | None) -> None:
    err.write(f"No resources found in {namespace} namespace.\n" if namespace else "No resources found\n")


# -- create ---------------------------------------------------------------------------------------


async def create(cluster: Cluster, args: argparse.Namespace, out: IO[str]) -> int:
    """``create clusterqueue|localqueue|resourceflavor NAME``: build the object (:mod:`.specs`), POST it
    (not with ``--dry-run=client``; ``dryRun=All`` with ``server``) and print it, ``... created`` by default."""
    dry_run = check_dry_run(getattr(args, "dry_run", "none"))
    printing.check_output(args.output)
    namespace: str | None = None
    if args.kind == "clusterqueue":
        ref = resources.CLUSTER_QUEUES
        obj = specs.cluster_queue(
            args.name,
            cohort=args.cohort or "",
            queueing_strategy=args.queuing_strategy,
            namespace_selector=specs.parse_key_values(args.namespace_selector, "namespace-selector")
            if args.namespace_selector is not None
            else None,
            reclaim_within_cohort=args.reclaim_within_cohort,
            preemption_within_cluster_queue=args.preemption_within_cluster_queue,
            nominal_quota=args.nominal_quota,
            borrowing_limit=args.borrowing_limit,
            lending_limit=args.lending_limit,
        )
    elif args.kind == "localqueue":
        ref = resources.LOCAL_QUEUES
        namespace = cluster.namespace
        if not args.clusterqueue:
            raise Failure("clusterqueue must be specified")
        if not args.ignore_unknown_cq:
            await cluster.request("GET", _path(resources.CLUSTER_QUEUES, name=args.clusterqueue))
        obj = specs.local_queue(args.name, namespace, args.clusterqueue)
    else:
        ref = resources.RESOURCE_FLAVORS
        obj = specs.resource_flavor(
            args.name,
            node_labels=specs.parse_key_values(args.node_labels, "node-labels"),
            node_taints=args.node_taints,
            tolerations=args.tolerations,
            topology_name=args.topology_name,
        )
    if dry_run != "client":
        obj = await cluster.request("POST", _path(ref, namespace=namespace), query=_dry_run_query(dry_run), body=obj)
        obj.setdefault("apiVersion", ref.api_version)
        obj.setdefault("kind", ref.kind)
    printing.print_object(
        obj, args.output, out, operation="created", dry_run=dry_run, show_managed_fields=args.show_managed_fields
    )
    return 0


# -- list -----------------------------------------------------------------------------------------


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in (obj.get("status") or {}).get("conditions") or []}


def _is_true(obj: dict[str, Any], condition: str) -> bool:
    return _conditions(obj).get(condition, {}).get("status") == "True"


def workload_status(wl: dict[str, Any]) -> str:
    """Kueue's workload.Status: ``finished``, ``admitted``, ``quotaReserved`` or ``pending``, from the
    Finished, Admitted and QuotaReserved conditions (pkg/workload/workload.go)."""
    if _is_true(wl, "Finished"):
        return "finished"
    if _is_true(wl, "Admitted"):
        return "admitted"
    if _is_true(wl, "QuotaReserved"):
        return "quotaReserved"
    return "pending"


def _parse_bool(text: str) -> bool:
    lowered = text.strip()
    if lowered in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if lowered in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise Failure(f'invalid argument "{text}" for "--active" flag: strconv.ParseBool: parsing "{text}": invalid syntax')


#: The pages of a LIST as read: each page's items and its ListMeta (``resourceVersion``, ``continue``).
Pages = list[tuple[list[dict[str, Any]], dict[str, Any]]]


async def _list_all(
    cluster: Cluster, ref: resources.ResourceRef, *, namespace: str | None, args: argparse.Namespace, label: str = ""
) -> Pages:
    selector = ",".join(part for part in (getattr(args, "selector", "") or "", label) if part)
    pages: Pages = []
    async for page in cluster.list_pages(
        _path(ref, namespace=namespace), label_selector=selector, field_selector=getattr(args, "field_selector", "")
    ):
        pages.append((list(page.get("items") or []), dict(page.get("metadata") or {})))
    return pages


def _keep(pages: Pages, wanted: Any) -> Pages:
    """Each page with the items ``wanted(item)`` holds for (kueuectl filters each page it reads)."""
    return [([item for item in items if wanted(item)], meta) for items, meta in pages]


def _items(pages: Pages) -> list[dict[str, Any]]:
    return [item for items, _ in pages for item in items]


def _print_list(
    pages: Pages,
    ref: resources.ResourceRef,
    args: argparse.Namespace,
    out: IO[str],
    err: IO[str],
    *,
    headers: list[str],
    row: Any,
    namespace: str | None,
) -> int:
    """Print the pages as kueuectl's list commands do: with ``-o``, each page's list (an empty page too:
    ``items: []``); else one table of every item. When no page had an item, ``No resources found ...`` on
    stderr (after the empty lists of ``-o``)."""
    items = _items(pages)
    if args.output:
        for index, (page, meta) in enumerate(pages):
            printing.print_list(
                page,
                ref.kind,
                ref.api_version,
                args.output,
                out,
                list_meta=meta,
                first=index == 0,
                show_managed_fields=getattr(args, "show_managed_fields", False),
            )
    elif items:
        names = (
            [str(i["metadata"].get("namespace", "")) for i in items] if getattr(args, "all_namespaces", False) else None
        )
        out.write(printing.table(headers, [row(item) for item in items], namespaces=names))
    if not items:
        _no_resources(err, namespace)
    return 0


async def list_cluster_queues(cluster: Cluster, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """``list clusterqueue [-l SEL] [--field-selector SEL] [--active=true|false]``: NAME, COHORT, PENDING
    WORKLOADS, ADMITTED WORKLOADS, ACTIVE (the Active condition is True), AGE."""
    printing.check_output(args.output)
    active = [_parse_bool(v) for raw in args.active or [] for v in raw.split(",")]
    if len(active) > 1:
        raise Failure("only one active flag can be provided")
    pages = await _list_all(cluster, resources.CLUSTER_QUEUES, namespace=None, args=args)
    if active:
        pages = _keep(pages, lambda cq: _is_true(cq, "Active") == active[0])
    now = datetime.now(UTC)

    def row(cq: dict[str, Any]) -> list[Any]:
        status = cq.get("status") or {}
        return [
            cq["metadata"]["name"],
            (cq.get("spec") or {}).get("cohortName", ""),
            int(status.get("pendingWorkloads") or 0),
            int(status.get("admittedWorkloads") or 0),
            _is_true(cq, "Active"),
            printing.age(cq["metadata"].get("creationTimestamp"), now),
        ]

    headers = ["Name", "Cohort", "Pending Workloads", "Admitted Workloads", "Active", "Age"]
    return _print_list(pages, resources.CLUSTER_QUEUES, args, out, err, headers=headers, row=row, namespace=None)


async def list_local_queues(cluster: Cluster, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """``list localqueue [-c CQ] [-l SEL] [--field-selector SEL] [-A]``: NAME, CLUSTERQUEUE, PENDING
    WORKLOADS, ADMITTED WORKLOADS, AGE (NAMESPACE first with -A)."""
    printing.check_output(args.output)
    namespace = None if args.all_namespaces else cluster.namespace
    pages = await _list_all(cluster, resources.LOCAL_QUEUES, namespace=namespace, args=args)
    if args.clusterqueue:
        pages = _keep(pages, lambda lq: (lq.get("spec") or {}).get("clusterQueue") == args.clusterqueue)
    now = datetime.now(UTC)

    def row(lq: dict[str, Any]) -> list[Any]:
        status = lq.get("status") or {}
        return [
            lq["metadata"]["name"],
            (lq.get("spec") or {}).get("clusterQueue", ""),
            int(status.get("pendingWorkloads") or 0),
            int(status.get("admittedWorkloads") or 0),
            printing.age(lq["metadata"].get("creationTimestamp"), now),
        ]

    headers = ["Name", "ClusterQueue", "Pending Workloads", "Admitted Workloads", "Age"]
    return _print_list(pages, resources.LOCAL_QUEUES, args, out, err, headers=headers, row=row, namespace=namespace)


async def list_resource_flavors(cluster: Cluster, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """``list resourceflavor [-l SEL] [--field-selector SEL]``: NAME, NODE LABELS (``k=v``, sorted, joined by
    ``, ``), AGE."""
    printing.check_output(args.output)
    pages = await _list_all(cluster, resources.RESOURCE_FLAVORS, namespace=None, args=args)
    now = datetime.now(UTC)

    def row(rf: dict[str, Any]) -> list[Any]:
        labels = (rf.get("spec") or {}).get("nodeLabels") or {}
        return [
            rf["metadata"]["name"],
            ", ".join(sorted(f"{k}={v}" for k, v in labels.items())),
            printing.age(rf["metadata"].get("creationTimestamp"), now),
        ]

    return _print_list(
        pages,
        resources.RESOURCE_FLAVORS,
        args,
        out,
        err,
        headers=["Name", "Node Labels", "Age"],
        row=row,
        namespace=None,
    )


@dataclass(frozen=True)
class _Served:
    """One resource of the server's discovery: its group, version, whether that version is the group's
    preferred one, and its APIResource entry."""

    group: str
    version: str
    entry: dict[str, Any]

    @property
    def names(self) -> tuple[str, str]:
        """Its plural and singular names (the kind lowercased when discovery names no singular, as client-go's
        DiscoveryRESTMapper)."""
        plural = str(self.entry.get("name") or "")
        return plural, str(self.entry.get("singularName") or self.entry.get("kind") or "").lower()

    def ref(self) -> resources.ResourceRef:
        return resources.ResourceRef(
            group=self.group,
            version=self.version,
            plural=str(self.entry.get("name") or ""),
            kind=str(self.entry.get("kind") or ""),
            namespaced=bool(self.entry.get("namespaced")),
        )


async def _served(cluster: Cluster) -> list[_Served]:
    """Every resource the server's discovery lists (no subresource), in the REST mapper's order of priority: the
    core group, then each group in the order ``/apis`` gives them, its preferred version first."""
    versions = [("", str(v)) for v in (await cluster.request("GET", "/api")).get("versions") or []]
    for group in (await cluster.request("GET", "/apis")).get("groups") or []:
        preferred = str((group.get("preferredVersion") or {}).get("version") or "")
        listed = [str(v.get("version") or "") for v in group.get("versions") or []]
        for version in sorted(listed, key=lambda v: v != preferred):
            versions.append((str(group.get("name") or ""), version))
    served: list[_Served] = []
    for group_name, version in versions:
        listing = await cluster.resources_of(f"{group_name}/{version}" if group_name else version)
        for entry in (listing or {}).get("resources") or []:
            if isinstance(entry, dict) and "/" not in str(entry.get("name") or ""):
                served.append(_Served(group=group_name, version=version, entry=entry))
    return served


def _expanded(served: list[_Served], resource: str, group: str) -> tuple[str, str]:
    """``(resource, group)`` with a short name (``lws``, ``sts``, ``deploy``) replaced by its resource and group,
    as kubectl's REST mapper (client-go restmapper.shortcutExpander) does: not when a resource (of ``group``,
    when one is given) is named so, the first short name that matches otherwise, then one of a group that
    ``group`` begins."""
    candidates = [s for s in served if not group or s.group == group]
    if any(resource in s.names for s in candidates):
        return resource, group
    for s in candidates:
        if resource in (s.entry.get("shortNames") or ()):
            return s.names[0], s.group
    if group:
        for s in served:
            if s.group.startswith(group) and resource in (s.entry.get("shortNames") or ()):
                return s.names[0], s.group
    return resource, group


async def resolve_type(cluster: Cluster, text: str) -> resources.ResourceRef:
    """The kind a ``--for TYPE[.VERSION][.GROUP]`` names, as kueuectl's decodeResourceTypeName finds it with the
    server's discovery (a REST mapper that expands short names): a plural, singular, kind (any case) or short
    name, optionally with its group (``job``, ``jobs.batch``, ``JobSet``, ``lws``, ``deploy``,
    ``deployments.v1.apps``); the first in the mapper's order of priority. Raises Failure with the mapper's
    ``no matches for GROUP/, Resource=TYPE`` for another."""
    wanted = text.lower()
    served = await _served(cluster)
    tries: list[tuple[str, str, str]] = []
    if wanted.count(".") >= 2:  # schema.ParseResourceArg: resource.version.group, tried first
        resource, version, group = wanted.split(".", 2)
        tries.append((resource, version, group))
    resource, _, group = wanted.partition(".")
    tries.append((resource, "", group))
    for resource, version, group in tries:
        resource, group = _expanded(served, resource, group)
        for s in served:
            if resource in s.names and (not group or s.group == group) and (not version or s.version == version):
                return s.ref()
    raise Failure(f"no matches for {group}/, Resource={resource}")


async def split_for(cluster: Cluster, text: str, *, message: str) -> tuple[resources.ResourceRef, str]:
    """``TYPE[.GROUP]/NAME`` as (kind, name); raises Failure with ``message`` when it is not that form."""
    parts = text.split("/")
    if len(parts) > 2:
        raise Failure("arguments in resource/name form may not have more than one slash")
    if len(parts) != 2:
        raise Failure(message)
    return await resolve_type(cluster, parts[0]), parts[1]


async def _for_object(
    cluster: Cluster, ref: resources.ResourceRef, name: str, namespace: str | None
) -> dict[str, Any] | None:
    items: list[dict[str, Any]] = []
    path = _path(ref, namespace=namespace if ref.namespaced else None)
    async for page in cluster.list_pages(path, field_selector=f"metadata.name={name}"):
        items.extend(page.get("items") or [])
    return items[0] if items else None


async def _job_type(cluster: Cluster, owner: dict[str, Any]) -> str | None:
    """The JOB TYPE of an owner: the singular name of its kind in the discovery of its apiVersion, followed by
    ``.GROUP`` only when that discovery entry names a group (list_workload_printer.go apiResourceType reads
    APIResource.Group, which an API server leaves empty but for a resource served from another group: a
    batch/v1 Job is ``job``, as Kueue's docs show); cut to :data:`CRD_TYPE_MAX_LENGTH` characters and ``...``."""
    listing = await cluster.resources_of(str(owner.get("apiVersion", "")))
    for resource in (listing or {}).get("resources") or []:
        if resource.get("kind") == owner.get("kind") and resource.get("singularName"):
            text = ".".join(p for p in (str(resource["singularName"]), str(resource.get("group") or "")) if p)
            return f"{text[:CRD_TYPE_MAX_LENGTH]}..." if len(text) > CRD_TYPE_MAX_LENGTH else text
    return None


async def list_workloads(cluster: Cluster, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """``list workload [-c CQ] [-q LQ] [--status S]... [-l SEL] [--field-selector SEL] [-A] [--for TYPE/NAME]``:
    NAME, JOB TYPE, JOB NAME, LOCALQUEUE, CLUSTERQUEUE, STATUS, POSITION IN QUEUE (a pending workload's
    position in its LocalQueue, :mod:`.positions`), EXEC TIME (since admission, to the end when finished),
    AGE. ``-c`` keeps workloads admitted to that ClusterQueue, as kueuectl."""
    printing.check_output(args.output)
    statuses = set()
    for status in args.status or []:
        if status.lower() not in WORKLOAD_STATUSES:
            raise Failure(f'invalid status value ({status}). Must be "all", "pending", "admitted" or "finished"')
        statuses.add(status.lower())
    namespace = None if args.all_namespaces else cluster.namespace
    owner_uid = ""
    if args.for_object:
        ref, name = await split_for(cluster, args.for_object, message="--for must be in resource/name form")
        target = await _for_object(cluster, ref, name, namespace)
        if target is None:
            _no_resources(err, namespace)
            return 0
        owner_uid = str(target["metadata"].get("uid", ""))
    pages = await _list_all(
        cluster,
        resources.WORKLOADS,
        namespace=namespace,
        args=args,
        label=f"{JOB_UID_LABEL}={owner_uid}" if owner_uid else "",
    )
    if owner_uid and not _items(pages):  # kueuectl: no job-uid label on the Workloads; match their owners instead
        pages = _keep(
            await _list_all(cluster, resources.WORKLOADS, namespace=namespace, args=args),
            lambda wl: any(o.get("uid") == owner_uid for o in wl["metadata"].get("ownerReferences") or []),
        )

    def admitted_to(wl: dict[str, Any]) -> str:
        return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")

    pages = _keep(
        pages,
        lambda wl: (
            (not args.localqueue or (wl.get("spec") or {}).get("queueName") == args.localqueue)
            and (not args.clusterqueue or admitted_to(wl) == args.clusterqueue)
            and (not statuses or "all" in statuses or workload_status(wl).lower() in statuses)
        ),
    )
    items = _items(pages)
    if not items or args.output:
        return _print_list(pages, resources.WORKLOADS, args, out, err, headers=[], row=None, namespace=namespace)
    local_queues: dict[tuple[str, str], dict[str, Any] | None] = {}
    for wl in items:
        key = (str(wl["metadata"].get("namespace", "")), str((wl.get("spec") or {}).get("queueName", "")))
        if admitted_to(wl) or key in local_queues:
            continue
        try:
            local_queues[key] = await cluster.request(
                "GET", _path(resources.LOCAL_QUEUES, namespace=key[0], name=key[1])
            )
        except Failure as failure:
            if failure.status != 404:
                raise
            local_queues[key] = None

    def cluster_queue_of(wl: dict[str, Any]) -> str:
        lq = local_queues.get(
            (str(wl["metadata"].get("namespace", "")), str((wl.get("spec") or {}).get("queueName", "")))
        )
        return admitted_to(wl) or (str((lq.get("spec") or {}).get("clusterQueue", "")) if lq else "")

    pending: dict[str, list[dict[str, Any]]] = {}
    for wl in items:
        if workload_status(wl) == "pending" and cluster_queue_of(wl):
            pending.setdefault(cluster_queue_of(wl), []).append(wl)
    where = await positions.pending_positions(cluster, pending) if pending else {}
    job_types = {}
    for wl in items:
        for owner in wl["metadata"].get("ownerReferences") or []:
            key = (str(owner.get("apiVersion")), str(owner.get("kind")))
            if key not in job_types:
                job_types[key] = await _job_type(cluster, owner)
    now = datetime.now(UTC)

    def row(wl: dict[str, Any]) -> list[Any]:
        meta = wl["metadata"]
        owners = meta.get("ownerReferences") or []
        types = sorted({t for o in owners if (t := job_types.get((str(o.get("apiVersion")), str(o.get("kind")))))})
        position = where.get((str(meta.get("namespace", "")), str(meta["name"])))
        exec_time = ""
        conditions = _conditions(wl)
        if conditions.get("Admitted", {}).get("status") == "True":
            start = printing.parse_time(conditions["Admitted"].get("lastTransitionTime"))
            finished = conditions.get("Finished", {})
            end = printing.parse_time(finished.get("lastTransitionTime")) if finished.get("status") == "True" else now
            if start is not None and end is not None:
                exec_time = printing.human_duration((end - start).total_seconds())
        return [
            meta["name"],
            ", ".join(types),
            ", ".join(sorted({str(o.get("name", "")) for o in owners})),
            (wl.get("spec") or {}).get("queueName", ""),
            cluster_queue_of(wl),
            workload_status(wl).upper(),
            "" if position is None else str(position),
            exec_time,
            printing.age(meta.get("creationTimestamp"), now),
        ]

    headers = [
        "Name",
        "Job Type",
        "Job Name",
        "LocalQueue",
        "ClusterQueue",
        "Status",
        "Position in Queue",
        "Exec Time",
        "Age",
    ]
    return _print_list(pages, resources.WORKLOADS, args, out, err, headers=headers, row=row, namespace=namespace)


async def list_pods(cluster: Cluster, args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """``list pods --for TYPE/NAME [-l SEL] [--field-selector SEL] [-A]``: the pods of a Job, of an
    integration's job (a JobSet, a PyTorchJob, ...), or the group of a Pod (their integration's pod label
    selector), with the server's own columns (a Table) or ``-o``."""
    printing.check_output(args.output)
    if not args.for_object:
        raise Failure('required flag(s) "for" not set')
    ref, name = await split_for(
        cluster,
        args.for_object,
        message=f"invalid value '{args.for_object}' used in --for flag; value must be in the format TYPE[.API-GROUP]/NAME",
    )
    namespace = None if args.all_namespaces else cluster.namespace
    target = await _for_object(cluster, ref, name, namespace)
    if target is None:
        err.write(f"No resources found in {namespace} namespace.\n" if namespace else "No resources found.\n")
        return 0
    if ref.kind == "Pod":
        group = ((target["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)) or ""
        pod_selector = f"{POD_GROUP_LABEL}={group}" if group else ""
        if not group:  # a Pod outside a group: itself
            args.field_selector = ",".join(p for p in (args.field_selector, f"metadata.name={name}") if p)
    else:
        label = POD_SELECTORS.get((ref.group, ref.kind))
        integration = integrations.by_kind(ref.kind)
        if label is not None:
            pod_selector = f"{label}={name}"
        elif integration is not None and integration.pod_label_selector is not None:
            pod_selector = integration.pod_label_selector(target)
            if not pod_selector:  # Kueue's kueuectl: an empty selector lists nothing for it
                err.write(f"No resources found in {namespace} namespace.\n" if namespace else "No resources found.\n")
                return 0
        else:
            raise Failure(f"unsupported kind: {ref.kind}")
    selector = ",".join(p for p in (args.selector, pod_selector) if p)
    path = _path(resources.PODS, namespace=namespace)
    if args.output:
        items: list[dict[str, Any]] = []
        async for page in cluster.list_pages(path, label_selector=selector, field_selector=args.field_selector):
            items.extend(page.get("items") or [])
        if not items:
            err.write(f"No resources found in {namespace} namespace.\n" if namespace else "No resources found.\n")
            return 0
        printing.print_list(items, "Pod", "v1", args.output, out, show_managed_fields=args.show_managed_fields)
        return 0
    headers: list[str] = []
    rows: list[list[Any]] = []
    names: list[str] = []
    async for page in cluster.list_pages(
        path, label_selector=selector, field_selector=args.field_selector, accept=TABLE
    ):
        if page.get("kind") != "Table":  # a server without server-side printing: NAME and AGE
            now = datetime.now(UTC)
            headers = ["Name", "Age"]
            for pod in page.get("items") or []:
                rows.append([pod["metadata"]["name"], printing.age(pod["metadata"].get("creationTimestamp"), now)])
                names.append(str(pod["metadata"].get("namespace", "")))
            continue
        shown = [i for i, c in enumerate(page.get("columnDefinitions") or []) if int(c.get("priority") or 0) == 0]
        headers = [page["columnDefinitions"][i]["name"] for i in shown]
        for table_row in page.get("rows") or []:
            cells = table_row.get("cells") or []
            rows.append([cells[i] if i < len(cells) else None for i in shown])
            names.append(str(((table_row.get("object") or {}).get("metadata") or {}).get("namespace", "")))
    if not rows:
        err.write(f"No resources found in {namespace} namespace.\n" if namespace else "No resources found.\n")
        return 0
    out.write(printing.table(headers, rows, namespaces=names if args.all_namespaces else None))
    return 0


# -- stop, resume ---------------------------------------------------------------------------------


def _merge_diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch from ``before`` to ``after`` (controller-runtime's client.MergeFrom)."""
    patch: dict[str, Any] = {}
    for key in before.keys() | after.keys():
        if key not in after:
            patch[key] = None
        elif key not in before or before[key] != after[key]:
            if isinstance(before.get(key), dict) and isinstance(after[key], dict):
                patch[key] = _merge_diff(before[key], after[key])
            else:
                patch[key] = after[key]
    return patch


async def set_spec_field(cluster: Cluster, args: argparse.Namespace, out: IO[str]) -> int:
    """``stop|resume clusterqueue|localqueue|workload NAME``: GET the object, set ``spec.stopPolicy``
    (stop: ``HoldAndDrain``, or ``Hold`` with ``--keep-already-running``; resume: ``None``) or, for a
    Workload, ``spec.active`` (stop: false, resume: true), merge-patch the difference and print the object
    (``workload.kueue.x-k8s.io/NAME stopped|resumed``; a queue prints its name alone, as kueuectl)."""
    dry_run = check_dry_run(getattr(args, "dry_run", "none"))
    printing.check_output(args.output)
    ref = {
        "clusterqueue": resources.CLUSTER_QUEUES,
        "localqueue": resources.LOCAL_QUEUES,
        "workload": resources.WORKLOADS,
    }[args.kind]
    namespace = cluster.namespace if ref.namespaced else None
    path = _path(ref, namespace=namespace, name=args.name)
    before = await cluster.request("GET", path)
    after = copy.deepcopy(before)
    spec = after.setdefault("spec", {})
    stopping = args.command == "stop"
    operation = ""
    if args.kind == "workload":
        spec["active"] = not stopping
        operation = "stopped" if stopping else "resumed"
    elif stopping:
        spec["stopPolicy"] = "Hold" if args.keep_already_running else "HoldAndDrain"
    else:
        spec["stopPolicy"] = "None"
    if dry_run != "client":
        after = await cluster.request(
            "PATCH", path, query=_dry_run_query(dry_run), body=_merge_diff(before, after), content_type=MERGE_PATCH
        )
    after.setdefault("apiVersion", ref.api_version)
    after.setdefault("kind", ref.kind)
    printing.print_object(
        after, args.output, out, operation=operation, dry_run=dry_run, show_managed_fields=args.show_managed_fields
    )
    return 0


# -- delete workload --------------------------------------------------------------------------------


async def delete_workloads(
    cluster: Cluster, args: argparse.Namespace, stdin: IO[str], out: IO[str], err: IO[str]
) -> int:
    """``delete workload NAME... [--all] [-A] [-y] [--dry-run S]``: delete each Workload's owners (its Job;
    asking first, unless ``--yes`` or a dry run, ``Do you want to proceed (y/n)?``) and leave the Workload to
    the garbage collector, or delete the Workload itself when it has no owner. A name not found is reported
    on stderr and skipped, as kueuectl."""
    dry_run = check_dry_run(getattr(args, "dry_run", "none"))
    if not args.all and not args.names:
        raise Failure("requires at least 1 arg(s), only received 0")
    if args.all and args.names:
        raise Failure("name cannot be provided when a selector is specified")
    if args.all_namespaces and args.names:
        raise Failure("a resource cannot be retrieved by name across all namespaces")
    workloads: list[dict[str, Any]] = []
    if args.all:
        namespace = None if args.all_namespaces else cluster.namespace
        async for page in cluster.list_pages(_path(resources.WORKLOADS, namespace=namespace)):
            workloads.extend(page.get("items") or [])
    else:
        for name in args.names:
            try:
                workloads.append(
                    await cluster.request("GET", _path(resources.WORKLOADS, namespace=cluster.namespace, name=name))
                )
            except Failure as failure:
                if failure.status != 404:
                    raise
                err.write(f"{failure}\n")
    if not workloads:
        return 0
    owned: list[
        tuple[dict[str, Any], list[tuple[str, str]]]
    ] = []  # (workload, [(collection path, "plural.group/name")])
    for wl in workloads:
        targets = []
        for owner in wl["metadata"].get("ownerReferences") or []:
            api_version, kind = str(owner.get("apiVersion", "")), str(owner.get("kind", ""))
            listing = await cluster.resources_of(api_version)
            plural = next(
                (
                    str(r["name"])
                    for r in (listing or {}).get("resources") or []
                    if r.get("kind") == kind and "/" not in str(r.get("name", ""))
                ),
                None,
            )
            if plural is None:
                raise Failure(f'no matches for kind "{kind}" in version "{api_version}"')
            group = api_version.rpartition("/")[0]
            base = f"/apis/{api_version}" if group else f"/api/{api_version}"
            ns = urllib.parse.quote(str(wl["metadata"].get("namespace", "")), safe="")
            path = f"{base}/namespaces/{ns}/{plural}/{urllib.parse.quote(str(owner.get('name', '')), safe='')}"
            targets.append(
                (path, f"{plural}.{group}/{owner.get('name')}" if group else f"{plural}/{owner.get('name')}")
            )
        owned.append((wl, targets))
    if dry_run == "none" and not args.yes and any(targets for _, targets in owned):
        if args.all:
            message = "This operation will also delete the jobs associated with these workloads.\n"
        else:
            lines = [
                f"  - {', '.join(shown for _, shown in targets)} associated with the "
                f"{wl['metadata'].get('namespace')}/{wl['metadata']['name']} workload\n"
                for wl, targets in owned
                if targets
            ]
            message = "This operation will also delete:\n" + "\n".join(lines)
        out.write(message + "Do you want to proceed (y/n)? ")
        out.flush()
        answer = stdin.readline().strip().split()
        if not answer or answer[0].lower() != "y":
            out.write("Deletion is canceled\n")
            return 0
    for wl, targets in owned:
        for path, shown in targets:
            if dry_run != "client":
                try:
                    await cluster.request("DELETE", path, query=_dry_run_query(dry_run))
                except Failure as failure:
                    if failure.status != 404:
                        raise
            out.write(f"{shown} {printing.operation_text('deleted', dry_run)}\n")
        if not targets:
            path = _path(
                resources.WORKLOADS, namespace=str(wl["metadata"].get("namespace", "")), name=wl["metadata"]["name"]
            )
            if dry_run != "client":
                try:
                    await cluster.request("DELETE", path, query=_dry_run_query(dry_run))
                except Failure as failure:
                    if failure.status != 404:
                        raise
            wl.setdefault("apiVersion", KUEUE)
            wl.setdefault("kind", "Workload")
            printing.print_object(wl, None, out, operation="deleted", dry_run=dry_run)
    return 0


# -- version ----------------------------------------------------------------------------------------


def client_version() -> str:
    """kueue-es's version, as installed."""
    try:
        return metadata.version("kueue-es")
    except metadata.PackageNotFoundError:
        return "unknown"


#: (namespace, Deployment, container, label): Kueue's controller manager, as kueuectl looks for it, and
#: the kueue-es watcher of deploy/base.
IMAGES = (
    ("kueue-system", "kueue-controller-manager", "manager", "Kueue Controller Manager Image"),
    ("kueue-es", "kueue-es-watcher", "watcher", "kueue-es Image"),
)


async def version(cluster: Cluster | None, out: IO[str]) -> int:
    """``version``: ``Client Version: ...``, then the image of each of :data:`IMAGES` the cluster runs."""
    out.write(f"Client Version: v{client_version()} (kueue-es)\n")
    if cluster is None:
        return 0
    for namespace, name, container, label in IMAGES:
        try:
            deployment = await cluster.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        except Failure as failure:
            if failure.status == 404:
                continue
            raise
        containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
        image = next((c.get("image") for c in containers if c.get("name") == container), None)
        if image:
            out.write(f"{label}: {image}\n")
    return 0
