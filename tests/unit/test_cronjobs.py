"""The simulated CronJob controller's decisions (kueue_es/sim/cronjobs.py) at chosen times: what
kube-controller-manager's cronjob controller (cronjob_controllerv2.go syncCronJob, cleanupFinishedJobs) does
with a CronJob and the Jobs it owns, with no clock but the ``now`` each case gives."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from kueue_es.sim import cronjobs
from tests.kube import examples

UTC = datetime.UTC
CREATED = datetime.datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)  # a Monday, 30 s past a minute


def at(text: str) -> datetime.datetime:
    """A UTC time from ``HH:MM:SS`` on CREATED's day."""
    hours, minutes, seconds = (int(part) for part in text.split(":"))
    return CREATED.replace(hour=hours, minute=minutes, second=seconds)


def cron_job(schedule: str = "* * * * *", *, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """Kueue's sample CronJob (jobs/sample-cronjob.yaml) as stored: a uid, created at CREATED; ``spec``
    fields override."""
    [sample] = examples.load("jobs/sample-cronjob.yaml")
    sample["metadata"].update(uid="cj-uid", creationTimestamp=cronjobs.format_time(CREATED))
    sample["spec"].update(schedule=schedule, **spec)
    if status is not None:
        sample["status"] = status
    return sample


def job(name: str, *, uid: str = "", finished: str = "", start: str = "", completion: str = "") -> dict[str, Any]:
    """A Job the CronJob owns; ``finished``: Complete or Failed (that condition True)."""
    status: dict[str, Any] = {}
    if finished:
        status["conditions"] = [{"type": finished, "status": "True"}]
    if start:
        status["startTime"] = cronjobs.format_time(at(start))
    if completion:
        status["completionTime"] = cronjobs.format_time(at(completion))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "resourceVersion": "7"},
        "status": status,
    }


def active(*jobs: dict[str, Any]) -> list[dict[str, Any]]:
    return [cronjobs.job_reference(j) for j in jobs]


def minutes(moment: datetime.datetime) -> int:
    return int(moment.timestamp()) // 60


def test_the_job_is_kueues_documented_shape_named_by_the_schedule_minute() -> None:
    """Past a minute boundary the Job for that minute is made as tests/kube/examples.py cronjob_job() documents
    it (name ``<cronjob>-<minutes since the epoch>``, the jobTemplate's labels and spec, a controller owner
    reference), with the scheduled-timestamp annotation; the status lists nothing until it exists."""
    sync = cronjobs.sync(cron_job(), [], now=at("10:01:05"))
    scheduled = at("10:01:00")
    assert sync.scheduled == scheduled and sync.delete == ()
    documented = examples.cronjob_job(scheduled_minute=minutes(scheduled))
    documented["metadata"]["ownerReferences"][0]["uid"] = "cj-uid"
    assert sync.create is not None
    annotations = sync.create["metadata"].pop("annotations")
    assert sync.create == documented
    assert annotations == {cronjobs.SCHEDULED_TIMESTAMP_ANNOTATION: "2026-03-02T10:01:00Z"}
    assert sync.create["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "user-queue"}
    assert sync.next_sync == at("10:02:00") + cronjobs.NEXT_SCHEDULE_DELTA


def test_started_lists_the_job_and_the_schedule_time() -> None:
    """Once created, the Job is active and lastScheduleTime is its schedule time; a sync then makes nothing."""
    sync = cronjobs.sync(cron_job(), [], now=at("10:01:05"))
    assert sync.create is not None and sync.scheduled is not None
    created = {**sync.create, "metadata": {**sync.create["metadata"], "uid": "j1", "resourceVersion": "9"}}
    status = cronjobs.started(sync.status, created, scheduled=sync.scheduled)
    assert status == {"active": active(created), "lastScheduleTime": "2026-03-02T10:01:00Z"}
    again = cronjobs.sync(cron_job(status=status), [created], now=at("10:01:40"))
    assert again.create is None and again.status == status and again.delete == ()


def test_nothing_before_the_first_schedule_time_after_creation() -> None:
    """Created at 10:00:30, the first time is 10:01:00: at 10:00:59 nothing is due, and the timer is set for it."""
    sync = cronjobs.sync(cron_job(), [], now=at("10:00:59"))
    assert sync.create is None and sync.scheduled is None
    assert sync.next_sync == at("10:01:00") + cronjobs.NEXT_SCHEDULE_DELTA


def test_only_the_most_recent_missed_time_runs() -> None:
    """Last scheduled at 10:01, looked at again at 10:07:20 (the controller was away): one Job, for 10:07, not
    six; and the timer is for 10:08."""
    status = {"lastScheduleTime": "2026-03-02T10:01:00Z"}
    sync = cronjobs.sync(cron_job(status=status), [], now=at("10:07:20"))
    assert sync.scheduled == at("10:07:00")
    assert sync.create is not None and sync.create["metadata"]["name"] == f"sample-cronjob-{minutes(at('10:07:00'))}"
    assert sync.next_sync == at("10:08:00") + cronjobs.NEXT_SCHEDULE_DELTA


def test_a_time_older_than_the_starting_deadline_is_skipped() -> None:
    """Every 5 minutes, last at 10:00, startingDeadlineSeconds 60: at 10:05:30 the 10:05 time is still on, at
    10:06:30 it is too old and nothing runs until 10:10."""
    status = {"lastScheduleTime": "2026-03-02T10:00:00Z"}
    on_time = cronjobs.sync(cron_job("*/5 * * * *", status=status, startingDeadlineSeconds=60), [], now=at("10:05:30"))
    assert on_time.scheduled == at("10:05:00")
    late = cronjobs.sync(cron_job("*/5 * * * *", status=status, startingDeadlineSeconds=60), [], now=at("10:06:30"))
    assert late.create is None and late.scheduled is None
    assert late.next_sync == at("10:10:00") + cronjobs.NEXT_SCHEDULE_DELTA


def test_a_suspended_cronjob_creates_nothing_and_sets_no_timer() -> None:
    """spec.suspend: true: no Job whatever is due; it is looked at again only when it changes."""
    sync = cronjobs.sync(cron_job(suspend=True), [], now=at("10:30:00"))
    assert sync.create is None and sync.next_sync is None


def test_forbid_skips_while_a_job_it_owns_is_active() -> None:
    """concurrencyPolicy Forbid: the 10:01 Job still runs at 10:02, so no 10:02 Job; once it completed, the
    next sync makes the 10:02 one (the most recent missed time)."""
    running = job("sample-cronjob-1", uid="j1", start="10:01:01")
    status = {"active": active(running), "lastScheduleTime": "2026-03-02T10:01:00Z"}
    held = cronjobs.sync(cron_job(status=status, concurrencyPolicy="Forbid"), [running], now=at("10:02:05"))
    assert held.create is None and held.status == status
    assert held.next_sync == at("10:03:00") + cronjobs.NEXT_SCHEDULE_DELTA
    complete = job("sample-cronjob-1", uid="j1", finished="Complete", start="10:01:01", completion="10:02:30")
    freed = cronjobs.sync(cron_job(status=status, concurrencyPolicy="Forbid"), [complete], now=at("10:02:40"))
    assert freed.scheduled == at("10:02:00") and freed.create is not None
    assert freed.status == {"lastScheduleTime": "2026-03-02T10:01:00Z", "lastSuccessfulTime": "2026-03-02T10:02:30Z"}


def test_replace_deletes_the_active_jobs_then_creates() -> None:
    """concurrencyPolicy Replace: the still-running 10:01 Job is deleted and leaves the active list, then the
    10:02 Job is created; Allow (the default) keeps it and adds the new one."""
    running = job("sample-cronjob-1", uid="j1", start="10:01:01")
    status = {"active": active(running), "lastScheduleTime": "2026-03-02T10:01:00Z"}
    replace = cronjobs.sync(cron_job(status=status, concurrencyPolicy="Replace"), [running], now=at("10:02:05"))
    assert [j["metadata"]["uid"] for j in replace.delete] == ["j1"]
    assert replace.create is not None and "active" not in replace.status
    allow = cronjobs.sync(cron_job(status=status), [running], now=at("10:02:05"))
    assert allow.delete == () and allow.create is not None and allow.status["active"] == active(running)


def test_finished_and_vanished_jobs_leave_the_active_list() -> None:
    """A listed Job that failed, and one that is gone, are no longer active; a running one stays."""
    failed = job("a", uid="j1", finished="Failed", start="10:01:01")
    running = job("b", uid="j2", start="10:02:01")
    gone = job("c", uid="j3")
    status = {"active": active(failed, running, gone), "lastScheduleTime": "2026-03-02T10:02:00Z"}
    sync = cronjobs.sync(cron_job(status=status), [failed, running], now=at("10:02:30"))
    assert sync.status["active"] == active(running) and "lastSuccessfulTime" not in sync.status


@pytest.mark.parametrize(
    ("spec", "want_deleted"),
    [
        pytest.param({}, ["s1", "f1", "f2"], id="defaults keep 3 succeeded and 1 failed, the oldest go"),
        pytest.param(
            {"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 0},
            ["s1", "s2", "s3", "f1", "f2", "f3"],
            id="limits 1 and 0",
        ),
        pytest.param({"successfulJobsHistoryLimit": 10, "failedJobsHistoryLimit": 3}, [], id="limits not reached"),
    ],
)
def test_history_limits_delete_the_oldest_finished_jobs(spec: dict[str, Any], want_deleted: list[str]) -> None:
    """Four succeeded (s1 oldest by startTime) and three failed Jobs (f3 without a startTime counts as the
    newest); a running Job is never history."""
    owned = [
        job("s3", finished="Complete", start="10:03:00", completion="10:03:30"),
        job("s1", finished="Complete", start="10:01:00", completion="10:01:30"),
        job("s4", finished="Complete", start="10:04:00", completion="10:04:30"),
        job("s2", finished="Complete", start="10:02:00", completion="10:02:30"),
        job("f2", finished="Failed", start="10:02:10"),
        job("f3", finished="Failed"),
        job("f1", finished="Failed", start="10:01:10"),
        job("r", start="10:05:00"),
    ]
    status = {"lastScheduleTime": "2026-03-02T10:05:00Z"}
    sync = cronjobs.sync(cron_job(status=status, **spec), owned, now=at("10:05:10"))
    assert [j["metadata"]["name"] for j in sync.delete] == want_deleted
    assert sync.status["lastSuccessfulTime"] == "2026-03-02T10:04:30Z"


def test_the_schedule_is_read_in_the_time_zone() -> None:
    """``0 9 * * *`` in Asia/Tokyo (UTC+9) is midnight UTC: the Job of 2026-03-03 00:00 UTC, its annotation in
    Tokyo time; in UTC it would be 09:00 UTC."""
    tokyo = cron_job("0 9 * * *", timeZone="Asia/Tokyo")
    midnight = datetime.datetime(2026, 3, 3, 0, 0, tzinfo=UTC)
    sync = cronjobs.sync(tokyo, [], now=midnight + datetime.timedelta(seconds=5))
    assert sync.scheduled == midnight and sync.create is not None
    assert (
        sync.create["metadata"]["annotations"][cronjobs.SCHEDULED_TIMESTAMP_ANNOTATION] == "2026-03-03T09:00:00+09:00"
    )
    in_utc = cronjobs.sync(cron_job("0 9 * * *"), [], now=midnight + datetime.timedelta(seconds=5))
    assert in_utc.create is None and in_utc.next_sync == midnight.replace(hour=9) + cronjobs.NEXT_SCHEDULE_DELTA


def test_macros_are_schedules() -> None:
    """``@hourly`` as Kubernetes' cron parser reads it: at minute 0 of each hour."""
    sync = cronjobs.sync(cron_job("@hourly"), [], now=at("11:00:01"))
    assert sync.scheduled == at("11:00:00")


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        pytest.param({"schedule": "not a schedule"}, "expected exactly 5 fields", id="words"),
        pytest.param({"schedule": "* * * * * *"}, "expected exactly 5 fields", id="six fields (seconds)"),
        pytest.param({"schedule": "61 * * * *"}, "unparseable schedule", id="minute out of range"),
        pytest.param({"timeZone": "Mars/Olympus_Mons"}, "unknown time zone", id="unknown time zone"),
    ],
)
def test_an_unreadable_schedule_makes_nothing(spec: dict[str, Any], want: str) -> None:
    """What Kubernetes' parser refuses makes no Job and no timer (the controller waits for a change)."""
    broken = cron_job(**spec)
    with pytest.raises(cronjobs.ScheduleError, match=want):
        cronjobs.schedule_of(broken)
    sync = cronjobs.sync(broken, [], now=at("10:05:00"))
    assert sync.create is None and sync.next_sync is None


def test_a_job_made_before_a_crash_is_listed_not_made_again() -> None:
    """The Job of the due time exists (made, then the status write was lost): it is listed as active with the
    schedule time, and none is created."""
    made = job(f"sample-cronjob-{minutes(at('10:01:00'))}", uid="j1", start="10:01:01")
    sync = cronjobs.sync(cron_job(), [made], now=at("10:01:30"))
    assert sync.create is None
    assert sync.status == {"active": active(made), "lastScheduleTime": "2026-03-02T10:01:00Z"}
