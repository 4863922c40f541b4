"""An elastic job's workload slices, as Kueue's job reconciler keeps them (SEMANTICS-ADVANCED D.1, D.2).

Why this module exists: with the gate ElasticJobsViaWorkloadSlices on, a job annotated
``kueue.x-k8s.io/elastic-job: "true"`` may change its pod counts while it runs. Kueue's job
reconciler (pkg/workloadslicing/workloadslicing.go EnsureWorkloadSlices, jobframework
reconciler.go prepareWorkloadSlice) then keeps a chain of Workloads: a scale-down, or any change
while the slice holds no quota, updates the slice in place; a scale-up of a slice that holds quota
creates a replacement slice asking for the new counts, which the admitter admits for the delta
(:mod:`kueue_es.scheduling.slices`). This module decides which Workloads to publish from the job's
conversion and the slices the log holds; the watcher publishes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import msgspec

from kueue_es.events import models, slices

_HASH_LENGTH = 5
_MAX_WORKLOAD_NAME = 253


def slice_name(
    *, job_name: str, job_uid: str, generation: int, kind: str = "Job", group: str = "batch", extra: str = ""
) -> str:
    """The name Kueue gives an elastic job's slice: ``<kind lower-cased>-<name>-<5 hex>`` where the hash
    also covers the job's ``metadata.generation``, so each scale gives a new name
    (workload_names.go GenerateWorkloadNameWithExtra; reconciler.go newWorkloadName). ``extra``, when
    given, replaces the generation in the hash: a RayJob's or RayService's ``<generation>_<its
    RayCluster's generation>`` (raycluster/common.go GetWorkloadNameExtraPart)."""
    text = f"{kind}\n{group}\n{job_name}\n{job_uid}\n{extra or generation}"
    digest = hashlib.sha1(text.encode()).hexdigest()
    prefix = f"{kind.lower()}-{job_name}"[: _MAX_WORKLOAD_NAME - 1 - _HASH_LENGTH]
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def chain(published: Iterable[models.Workload], *, job_uid: str, finished: Mapping[str, bool]) -> list[models.Workload]:
    """The slices of the job with UID ``job_uid`` that have not finished (``finished[key]``: the
    Workload object says Finished), oldest first: by the replacement links, then creation time and
    name (workloadslicing.FindNotFinishedWorkloads)."""
    mine = [
        wl
        for wl in published
        if wl.owner is not None
        and wl.owner.uid == job_uid
        and slices.is_elastic(wl.metadata.annotations)
        and not finished.get(wl.key, False)
    ]
    return sorted(mine, key=lambda wl: (wl.metadata.creation_timestamp_ms, _depth(wl, mine), wl.metadata.name))


def _depth(wl: models.Workload, among: list[models.Workload]) -> int:
    by_key = {w.key: w for w in among}
    depth, seen = 0, {wl.key}
    current = slices.replacement_for(wl)
    while current is not None and current in by_key and current not in seen:
        seen.add(current)
        depth += 1
        current = slices.replacement_for(by_key[current])
    return depth


def _counts(workload: models.Workload) -> dict[str, int]:
    return {ps.name: ps.count for ps in workload.spec.pod_sets}


def _with_counts(workload: models.Workload, counts: Mapping[str, int]) -> models.Workload:
    pod_sets = [msgspec.structs.replace(ps, count=counts[ps.name]) for ps in workload.spec.pod_sets]
    return msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, pod_sets=pod_sets))


def plan(
    observed: models.Workload,
    *,
    slices_now: list[models.Workload],
    reserved: Mapping[str, bool],
    running: bool,
    generation: int,
    now_ms: int,
    kind: str = "Job",
    group: str = "batch",
    name_extra: str = "",
) -> list[models.Workload]:
    """The Workloads to publish for an elastic job whose conversion is ``observed`` (named for the
    job, its pod sets as the job asks now). ``slices_now``: its unfinished slices (:func:`chain`);
    ``reserved[key]``: the slice holds quota (its Workload object says QuotaReserved); ``running``:
    the job is not suspended (its slice's pod templates then carry what the dispatcher added, so
    only counts are taken from ``observed``); ``generation``: the job's ``metadata.generation``;
    ``now_ms``: when a new slice is created (ms since the epoch). ``kind``, ``group``, ``name_extra``:
    the job's kind and API group and what else names a slice (:func:`slice_name`).

    - no slice yet: the first, named for the generation, its own ``workload-slice-name``;
    - the job is suspended and its newest slice holds no quota: the slice follows it in place;
    - running, or suspended with the newest slice holding quota (admitted, not unsuspended yet: Kueue
      workloadslicing.go EnsureWorkloadSlices looks at the quota reservation only): as follows;
    - pod set names changed or counts equal: nothing;
    - running, the newest slice a replacement not yet holding quota: it takes the new counts;
    - running, some count smaller and none larger: the slice is updated in place (a scale-down);
    - running, some larger: a replacement slice with the new counts, created now,
      ``workload-slice-replacement-for`` the newest slice, with a UID of its own
      (:func:`kueue_es.events.slices.replacement_uid`), as Kueue's new Workload object has.
    """
    annotations = {**observed.metadata.annotations, slices.ELASTIC_JOB_ANNOTATION: "true"}
    if not slices_now:
        name = slice_name(
            job_name=observed.owner.name if observed.owner else observed.metadata.name,
            job_uid=observed.metadata.uid,
            generation=generation,
            kind=kind,
            group=group,
            extra=name_extra,
        )
        annotations[slices.SLICE_NAME_ANNOTATION] = name
        first = msgspec.structs.replace(
            observed, metadata=msgspec.structs.replace(observed.metadata, name=name, annotations=annotations)
        )
        return [first]
    newest = slices_now[-1]
    # Kueue's EnsureWorkloadSlices asks whether the slice holds quota, not whether the job runs: a job scaled
    # between its admission and its unsuspension (the dispatcher writes the Workload first) still gets a new
    # slice, as an admitted Workload's pod sets are immutable
    if not running and not reserved.get(newest.key, False):
        return [_in_place(newest, observed)]  # published again only when it changed (the publisher's dedup)
    wanted, have = _counts(observed), _counts(newest)
    if set(wanted) != set(have) or wanted == have:
        return []  # only counts may change while it runs (the non-elastic path keeps the slice)
    # The first slice of a running job holds quota (the job started once it was admitted); a
    # replacement does once its Workload object says so.
    holds = reserved.get(newest.key, False) or slices.replacement_for(newest) is None
    if not holds or all(wanted[n] <= have[n] for n in wanted):
        return [_with_counts(newest, wanted)]  # a pending slice follows; a scale-down gives quota back at once
    name = slice_name(
        job_name=observed.owner.name if observed.owner else observed.metadata.name,
        job_uid=observed.metadata.uid,
        generation=generation,
        kind=kind,
        group=group,
        extra=name_extra,
    )
    if name == newest.metadata.name:
        return []
    replacement_annotations = {
        **newest.metadata.annotations,
        slices.SLICE_NAME_ANNOTATION: slices.slice_name(newest),
        slices.REPLACEMENT_FOR_ANNOTATION: f"{newest.metadata.namespace}/{newest.metadata.name}",
    }
    replacement = _with_counts(newest, wanted)
    job_uid = observed.owner.uid if observed.owner else observed.metadata.uid
    replacement = msgspec.structs.replace(
        replacement,
        metadata=msgspec.structs.replace(
            newest.metadata,
            name=name,
            uid=slices.replacement_uid(job_uid=job_uid, name=name),
            annotations=replacement_annotations,
            creation_timestamp_ms=now_ms,
        ),
    )
    return [replacement]


def _in_place(newest: models.Workload, observed: models.Workload) -> models.Workload:
    """``newest`` following a suspended job: its name, UID, creation time and chain annotations kept, the
    rest from ``observed``."""
    annotations = {
        **observed.metadata.annotations,
        **{
            k: v
            for k, v in newest.metadata.annotations.items()
            if k in (slices.ELASTIC_JOB_ANNOTATION, slices.SLICE_NAME_ANNOTATION, slices.REPLACEMENT_FOR_ANNOTATION)
        },
    }
    return msgspec.structs.replace(
        observed,
        metadata=msgspec.structs.replace(
            observed.metadata,
            name=newest.metadata.name,
            uid=newest.metadata.uid,
            annotations=annotations,
            creation_timestamp_ms=newest.metadata.creation_timestamp_ms,
        ),
    )


def is_elastic_job(job: Mapping[str, object], *, enabled: bool) -> bool:
    """Whether ``job`` is an elastic job Kueue handles as one: the gate is on and it carries the
    annotation (workloadslicing.Enabled)."""
    meta = job.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return enabled and isinstance(annotations, dict) and slices.is_elastic(annotations)


def extras(
    slices_now: list[models.Workload], *, reserved: Mapping[str, bool]
) -> list[tuple[models.Workload, str, str]]:
    """The slices Kueue's job reconciler finishes when a job has more than two unfinished ones
    (workloadslicing.go EnsureWorkloadSlices): it keeps the newest slice holding quota and its pending
    replacement (or else the newest slice) and finishes each other one, ``WorkloadSliceReplaced``
    ("Replaced to accommodate a new workload slice") when a later slice replaces it, else
    ``OutOfSync`` ("The workload slice is out of sync with its parent job"). Returns ``(slice,
    reason, message)`` for each. With one or two slices nothing is finished: which of them holds
    quota is read from their Workload objects, which can lag, and two is the normal chain (a slice
    and its pending replacement)."""
    if len(slices_now) <= 2:
        return []
    replaced = {key for wl in slices_now if (key := slices.replacement_for(wl)) is not None}
    holding = [wl for wl in slices_now if reserved.get(wl.key, False)]
    latest = holding[-1] if holding else None
    pending = next(
        (
            wl
            for wl in slices_now
            if latest is not None and slices.replacement_for(wl) == latest.key and not reserved.get(wl.key, False)
        ),
        None,
    )
    selected = pending or latest or slices_now[-1]
    out = []
    for wl in slices_now:
        if wl is selected or wl is latest:
            continue
        if wl.key in replaced:
            out.append((wl, slices.REPLACED_REASON, "Replaced to accommodate a new workload slice"))
        else:
            out.append((wl, slices.OUT_OF_SYNC_REASON, "The workload slice is out of sync with its parent job"))
    return out
