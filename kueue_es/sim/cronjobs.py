"""The CronJob controller's decisions, as kube-controller-manager makes them (cronjob_controllerv2.go), pure.

Why this module exists: ``kubectl apply -f`` of Kueue's jobs/sample-cronjob.yaml against ``kueue-es demo
--keep`` should make a Job every minute, as on a real cluster, and the emulated API server has no
kube-controller-manager. :class:`kueue_es.sim.controllers.SimulatedControllers` watches CronJobs and the
Jobs they own and, for each CronJob, calls :func:`sync` with the time now; what it returns (Jobs to delete,
the Job to create, the status to write, when to look again) it carries out. Everything here is a function
of its arguments: no clock, no I/O, so the schedule rules are tested with any ``now``.

What is simulated, as Kubernetes does it (syncCronJob, cleanupFinishedJobs, utils.go):

* the schedule (``spec.schedule``, 5 fields or a macro such as ``@hourly``, read by croniter) in
  ``spec.timeZone`` (an IANA name; UTC without one, where the real controller uses its own local time);
* only the most recent schedule time missed since ``max(creationTimestamp, status.lastScheduleTime)``
  runs, and with ``startingDeadlineSeconds`` only one no older than that;
* ``spec.suspend: true`` creates nothing; ``concurrencyPolicy`` Allow (the default), Forbid (nothing
  while a Job it owns is active), Replace (the active Jobs are deleted, then the new one created);
* the Job: ``<cronjob>-<scheduled time in minutes since the epoch>``, the labels and annotations of
  ``spec.jobTemplate.metadata`` plus ``batch.kubernetes.io/cronjob-scheduled-timestamp`` (RFC 3339 in
  the CronJob's time zone), ``spec`` = ``spec.jobTemplate.spec``, a controller owner reference;
* status: ``active`` (ObjectReferences of its unfinished Jobs; a Job that finished or went is dropped),
  ``lastScheduleTime``, ``lastSuccessfulTime`` (the latest ``completionTime``);
* history: at most ``successfulJobsHistoryLimit`` (default 3) Complete and ``failedJobsHistoryLimit``
  (default 1) Failed Jobs are kept, the oldest (by ``status.startTime``) deleted first.

Not simulated: Events (SuccessfulCreate, MissSchedule, ...), the ``@every <duration>`` form, an
"UnexpectedJob" adoption (a Job it owns but does not list stays unlisted, as there). The emulated API
server does not validate ``schedule`` or ``timeZone``: one :func:`schedule_of` cannot read makes no Job.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import zoneinfo
from collections.abc import Iterable, Mapping
from typing import Any

from croniter import croniter

SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
#: How long after a schedule time the controller looks again (nextScheduleDelta), so it is past it.
NEXT_SCHEDULE_DELTA = datetime.timedelta(milliseconds=100)
DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1

Object = dict[str, Any]


class ScheduleError(ValueError):
    """A CronJob whose schedule or time zone cannot be read: the controller makes no Job for it."""


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A parsed ``spec.schedule`` in a time zone; times in and out are aware datetimes, out in UTC."""

    expression: str
    zone: datetime.tzinfo

    def next_after(self, moment: datetime.datetime) -> datetime.datetime:
        """The first schedule time strictly after ``moment`` (cron.Schedule.Next)."""
        found = croniter(self.expression, moment.astimezone(self.zone)).get_next(datetime.datetime)
        return found.astimezone(datetime.UTC)

    def latest_at(self, moment: datetime.datetime) -> datetime.datetime:
        """The last schedule time at or before ``moment``."""
        start = moment.astimezone(self.zone) + datetime.timedelta(microseconds=1)
        return croniter(self.expression, start).get_prev(datetime.datetime).astimezone(datetime.UTC)


def schedule_of(cron_job: Mapping[str, Any]) -> Schedule:
    """The CronJob's schedule in its time zone; raises ScheduleError naming what cannot be read."""
    spec = cron_job.get("spec") or {}
    expression = str(spec.get("schedule") or "").strip()
    zone_name = spec.get("timeZone")
    try:
        zone: datetime.tzinfo = zoneinfo.ZoneInfo(zone_name) if zone_name else datetime.UTC
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as err:
        raise ScheduleError(f"unknown time zone {zone_name}") from err
    fields = expression.split()
    if not expression.startswith("@") and len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {expression!r}")
    if not croniter.is_valid(expression):
        raise ScheduleError(f"unparseable schedule {expression!r}")
    return Schedule(expression=expression, zone=zone)


def parse_time(text: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(moment: datetime.datetime) -> str:
    """An aware datetime as Kubernetes writes a metav1.Time: RFC 3339 in UTC, whole seconds, ``Z``."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the schedule ------------------------------------------------------------------------------------


def most_recent_schedule_time(
    cron_job: Mapping[str, Any], *, now: datetime.datetime, schedule: Schedule, with_deadline: bool
) -> tuple[datetime.datetime, datetime.datetime | None]:
    """(the earliest time considered, the most recent schedule time after it and at or before ``now``, or
    None). Earliest: ``status.lastScheduleTime``, else ``creationTimestamp``; ``with_deadline``: no earlier
    than ``now - startingDeadlineSeconds`` (utils.go mostRecentScheduleTime)."""
    meta, spec, status = cron_job.get("metadata") or {}, cron_job.get("spec") or {}, cron_job.get("status") or {}
    earliest = parse_time(status.get("lastScheduleTime")) or parse_time(meta.get("creationTimestamp")) or now
    deadline = spec.get("startingDeadlineSeconds")
    if with_deadline and isinstance(deadline, int):
        earliest = max(earliest, now - datetime.timedelta(seconds=deadline))
    first = schedule.next_after(earliest)
    if now < first:
        return earliest, None
    return earliest, schedule.latest_at(now)


def next_sync(cron_job: Mapping[str, Any], *, now: datetime.datetime, schedule: Schedule) -> datetime.datetime:
    """When the controller looks at the CronJob again: just after its next schedule time
    (nextScheduleTimeDuration)."""
    earliest, recent = most_recent_schedule_time(cron_job, now=now, schedule=schedule, with_deadline=False)
    return schedule.next_after(recent or earliest) + NEXT_SCHEDULE_DELTA


# -- the Job -----------------------------------------------------------------------------------------


def job_name(cron_job: Mapping[str, Any], scheduled: datetime.datetime) -> str:
    """``<cronjob>-<scheduled time in minutes since the epoch>`` (getJobName): one name per schedule time."""
    return f"{cron_job['metadata']['name']}-{int(scheduled.timestamp()) // 60}"


def owner_reference(cron_job: Mapping[str, Any]) -> Object:
    """The controller owner reference of the CronJob's Jobs (metav1.NewControllerRef)."""
    meta = cron_job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def job_from_template(cron_job: Mapping[str, Any], scheduled: datetime.datetime, *, schedule: Schedule) -> Object:
    """The Job the CronJob makes for ``scheduled`` (getJobFromTemplate2)."""
    meta = cron_job["metadata"]
    template = (cron_job.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = _rfc3339_in(scheduled, schedule.zone)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(cron_job, scheduled),
            "namespace": meta.get("namespace"),
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [owner_reference(cron_job)],
        },
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def job_reference(job: Mapping[str, Any]) -> Object:
    """A ``status.active`` entry: the Job's ObjectReference."""
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }


def finished_as(job: Mapping[str, Any]) -> str | None:
    """``Complete`` or ``Failed`` when the Job has finished (that condition True), else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("status") == "True":
            if condition.get("type") in ("Complete", "Failed"):
                return str(condition["type"])
    return None


def _rfc3339_in(moment: datetime.datetime, zone: datetime.tzinfo) -> str:
    """Go's time.RFC3339 of ``moment`` in ``zone``: ``Z`` for a zero offset, else the offset (``+01:00``)."""
    text = moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%S%z")
    return text[:-5] + "Z" if text.endswith("+0000") else f"{text[:-2]}:{text[-2:]}"


# -- one sync ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sync:
    """What one sync of a CronJob does, in order: delete ``delete`` (finished Jobs past the history
    limits, and with Replace the active ones), create ``create`` (for schedule time ``scheduled``), write
    ``status`` (without the new Job: :func:`started` adds it once it is created). ``next_sync``: when to
    look again (None: only on a change, as for a suspended CronJob)."""

    delete: tuple[Object, ...] = ()
    create: Object | None = None
    scheduled: datetime.datetime | None = None
    status: Object = dataclasses.field(default_factory=dict)
    next_sync: datetime.datetime | None = None


def sync(cron_job: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]], *, now: datetime.datetime) -> Sync:
    """One sync of ``cron_job`` at ``now``, given the Jobs it controls (cleanupFinishedJobs, then syncCronJob)."""
    spec = cron_job.get("spec") or {}
    status = copy.deepcopy(dict(cron_job.get("status") or {}))
    # 1. history: the oldest finished Jobs past the limits go
    owned = [dict(job) for job in jobs]
    deleted = _past_history_limits(cron_job, owned)
    deleted_uids = {job["metadata"].get("uid") for job in deleted}
    owned = [job for job in owned if job["metadata"].get("uid") not in deleted_uids]
    # 2. the active list: finished and vanished Jobs leave it; the latest completion is the last success
    _track_jobs(status, owned)
    done = Sync(delete=tuple(deleted), status=status)
    if (cron_job.get("metadata") or {}).get("deletionTimestamp") or spec.get("suspend") is True:
        return done
    try:
        schedule = schedule_of(cron_job)
    except ScheduleError:
        return done
    # 3. the schedule time due now, if any
    later = dataclasses.replace(done, next_sync=next_sync({**cron_job, "status": status}, now=now, schedule=schedule))
    _, scheduled = most_recent_schedule_time(
        {**cron_job, "status": status}, now=now, schedule=schedule, with_deadline=True
    )
    if scheduled is None:
        return later
    deadline = spec.get("startingDeadlineSeconds")
    if isinstance(deadline, int) and scheduled + datetime.timedelta(seconds=deadline) < now:
        return later  # missed its starting window
    name = job_name(cron_job, scheduled)
    active = status.get("active") or []
    if any(ref.get("name") == name for ref in active) or parse_time(status.get("lastScheduleTime")) == scheduled:
        return later  # done already
    # 4. the concurrency policy
    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy == "Forbid" and active:
        return later
    replaced: list[Object] = []
    if policy == "Replace" and active:  # every listed Job exists (_track_jobs dropped the others)
        by_uid = {job["metadata"].get("uid"): job for job in owned}
        replaced = [by_uid[ref.get("uid")] for ref in active]
        del status["active"]
    # 5. the Job (one of that name made already but not listed, after a crash, is listed now: status only)
    existing = next((job for job in owned if job["metadata"].get("name") == name), None)
    create = job_from_template(cron_job, scheduled, schedule=schedule) if existing is None else None
    if existing is not None:
        status = started(status, existing, scheduled=scheduled)
    then = next_sync({**cron_job, "status": started(status, None, scheduled=scheduled)}, now=now, schedule=schedule)
    return Sync(delete=(*deleted, *replaced), create=create, scheduled=scheduled, status=status, next_sync=then)


def started(status: Mapping[str, Any], job: Mapping[str, Any] | None, *, scheduled: datetime.datetime) -> Object:
    """The status once the Job for ``scheduled`` exists: it is active (unless finished), and
    ``lastScheduleTime`` is ``scheduled``."""
    updated = copy.deepcopy(dict(status))
    if job is not None and finished_as(job) is None:
        uid = job["metadata"].get("uid")
        if not any(ref.get("uid") == uid for ref in updated.get("active") or []):
            updated["active"] = [*(updated.get("active") or []), job_reference(job)]
    updated["lastScheduleTime"] = format_time(scheduled)
    return updated


def _track_jobs(status: Object, owned: list[Object]) -> None:
    """Drop finished and vanished Jobs from ``status.active``; ``lastSuccessfulTime``: the latest completion."""
    by_uid = {job["metadata"].get("uid"): job for job in owned}
    active = [
        ref
        for ref in status.get("active") or []
        if ref.get("uid") in by_uid and finished_as(by_uid[ref["uid"]]) is None
    ]
    if active:
        status["active"] = active
    else:
        status.pop("active", None)
    last = parse_time(status.get("lastSuccessfulTime"))
    for job in owned:
        completed = parse_time((job.get("status") or {}).get("completionTime"))
        if finished_as(job) is not None and completed is not None and (last is None or completed > last):
            last = completed
            status["lastSuccessfulTime"] = format_time(completed)


def _past_history_limits(cron_job: Mapping[str, Any], owned: list[Object]) -> list[Object]:
    """The finished Jobs to delete: the oldest Complete ones past ``successfulJobsHistoryLimit`` and the
    oldest Failed ones past ``failedJobsHistoryLimit`` (removeOldestJobs, oldest by startTime)."""
    spec = cron_job.get("spec") or {}
    limits = {
        "Complete": _limit(spec.get("successfulJobsHistoryLimit"), DEFAULT_SUCCESSFUL_HISTORY),
        "Failed": _limit(spec.get("failedJobsHistoryLimit"), DEFAULT_FAILED_HISTORY),
    }
    doomed: list[Object] = []
    for outcome, limit in limits.items():
        finished = sorted((job for job in owned if finished_as(job) == outcome), key=_by_start_time)
        doomed += finished[: max(0, len(finished) - limit)]
    return doomed


def _limit(value: Any, default: int) -> int:
    return value if isinstance(value, int) and value >= 0 else default


def _by_start_time(job: Mapping[str, Any]) -> tuple[bool, datetime.datetime, str]:
    """byJobStartTime: by ``status.startTime``, Jobs without one last, then by name."""
    start = parse_time((job.get("status") or {}).get("startTime"))
    never = datetime.datetime.max.replace(tzinfo=datetime.UTC)
    return start is None, start or never, str(job["metadata"].get("name") or "")
