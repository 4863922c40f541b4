"""Folding "as of" a time (kueue_es/logsource.py event_time, Folder): a workload created after that time is not
in the state then, although its WorkloadObserved carries no atMs (found by a new user: the dashboard's history
and `status --at` showed a Job pending 74 s before it was created)."""

from kueue_es import logsource
from kueue_es.events import manifests, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload

T0 = manifests.parse_time_ms("2026-01-01T00:00:00Z")


def message(seq: int, event: types.Event) -> LogMessage:
    out = subjects.fact_message(event)
    return LogMessage(seq=seq, subject=out.subject, data=out.data, headers={**out.headers, "Nats-Msg-Id": out.msg_id})


def folded(at_ms: int) -> logsource.Folder:
    events = [
        kueue_fact(flavor("default")),
        kueue_fact(cluster_queue("cq", flavors={"default": {"cpu": 4}})),
        kueue_fact(local_queue("lq", "cq")),
        types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name="old"), at_ms=T0 + 60_000),
        kueue_fact(workload("late", created=300, cpu="1")),  # created at 00:05:00, no atMs
    ]
    folder = logsource.Folder(at=logsource.At(text=str(at_ms), ms=at_ms))
    for seq, event in enumerate(events, start=1):
        if not folder.feed(message(seq, event)):
            break
    return folder


def test_a_workload_created_after_the_time_asked_is_not_in_the_state_then() -> None:
    assert logsource.event_time(kueue_fact(workload("w", created=300, cpu="1"))) == T0 + 300_000
    before = folded(T0 + 120_000)  # 00:02:00: after the finish at 00:01:00, before the creation
    assert before.stopped and "default/late" not in before.state.workloads
    assert before.last_ms == T0 + 60_000
    after = folded(T0 + 301_000)
    assert "default/late" in after.state.workloads and after.last_ms == T0 + 300_000
