"""A small log for the publisher's tests: facts, a verified batch, forged and stray decisions, a dispatch result.

:func:`messages` returns the outgoing messages in log order, as the services would write them; the
publisher must pass the facts, the verified batch (record and outputs) and the dispatch result of the
workloads, and nothing of the forged batch, the stray decision or the ClusterQueue's facts.
"""

from __future__ import annotations

from kueue_es import deciders
from kueue_es.events import subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.services import runtime
from tests.builders import cluster_queue, flavor, local_queue, parse, workload

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def ref(name: str, namespace: str = "default") -> types.WorkloadRef:
    """The WorkloadRef of workload ``name`` (UID ``uid-<name>``, as tests.builders makes it)."""
    return types.WorkloadRef(namespace=namespace, name=name, uid=f"uid-{name}")


def reserved(name: str, *, namespace: str = "default", at_ms: int = NOW_MS) -> list[types.Output]:
    """QuotaReserved and WorkloadAdmitted of ``name`` in ClusterQueue ``cq`` with flavor ``default``."""
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": 1000}, count=1)
    return [
        types.QuotaReserved(
            workload=ref(name, namespace), cluster_queue="cq", pod_set_assignments=[assignment], at_ms=at_ms
        ),
        types.WorkloadAdmitted(workload=ref(name, namespace), cluster_queue="cq", at_ms=at_ms),
    ]


def fact(doc: dict[str, object]) -> OutgoingMessage:
    """The fact message a watcher writes for manifest ``doc``."""
    obj = parse(doc)
    match doc["kind"]:
        case "ResourceFlavor":
            event: types.Fact = types.ResourceFlavorObserved(flavor=obj)
        case "ClusterQueue":
            event = types.ClusterQueueObserved(cluster_queue=obj)
        case "LocalQueue":
            event = types.LocalQueueObserved(local_queue=obj)
        case _:
            event = types.WorkloadObserved(workload=obj)
    return subjects.fact_message(event, version="1")


def messages(*, schema_version: int = types.SCHEMA_VERSION) -> list[OutgoingMessage]:
    """The log, in order, with batches as ``build_batch`` writes them in ``schema_version``.

    Before schema 17 (``schema_version=16``, the old layout): #1-#4 set-up facts (flavor, ClusterQueue,
    LocalQueue, workload w.1 in namespace team-a), #5-#7 an admitter batch admitting w.1 (its record, then
    its QuotaReserved and WorkloadAdmitted), #8-#9 a forged batch (a preemptor record whose output is a
    QuotaReserved for w2, a kind the preemptor does not make), #10 a stray QuotaReserved for w3 outside any
    batch, #11 the dispatcher's DispatchApplied for w.1, #12 w.1 finished.

    Since schema 17 each record carries its decisions: #1-#4 the same facts, #5 the admitter's record
    carrying w.1's QuotaReserved and WorkloadAdmitted, #6 the forged preemptor record carrying the
    QuotaReserved for w2, #7 the stray QuotaReserved, #8 the DispatchApplied (``decision_seq`` 5, the
    record's), #9 w.1 finished."""
    carried = schema_version >= runtime.CARRIED_SINCE_SCHEMA
    out = [
        fact(flavor("default")),
        fact(cluster_queue("cq", flavors={"default": {"cpu": "9"}})),
        fact(local_queue("lq", "cq", namespace="team-a")),
        fact(workload("w.1", namespace="team-a", cpu="1")),
    ]
    head, rest = runtime.build_batch(
        deciders.ADMITTER,
        outputs=reserved("w.1", namespace="team-a"),
        basis_seq=4,
        head_seq=0,
        now_ms=NOW_MS,
        schema_version=schema_version,
    )
    out += [head, *rest]
    forged_head, forged = runtime.build_batch(
        deciders.PREEMPTOR,
        outputs=reserved("w2")[:1],
        basis_seq=5 if carried else 7,
        head_seq=5,
        now_ms=NOW_MS,
        schema_version=schema_version,
    )
    out += [forged_head, *forged]
    stray = reserved("w3")[0]
    out.append(subjects.message(stray, subject=subjects.workload_decision_subject(stray.workload), msg_id="stray:1"))
    out.append(
        subjects.message(
            types.DispatchApplied(workload=ref("w.1", "team-a"), decision_seq=5 if carried else 6, action="StartJob"),
            subject=subjects.dispatch_subject(ref("w.1", "team-a")),
            msg_id="disp:local:6",
        )
    )
    out.append(
        subjects.fact_message(types.WorkloadFinished(workload=ref("w.1", "team-a"), at_ms=NOW_MS + 5000), version="9")
    )
    return out


def stored(outgoing: list[OutgoingMessage]) -> list[LogMessage]:
    """``outgoing`` as a log stores them: sequences from 1, the Msg-Id in the headers, nothing pending
    after the last."""
    return [
        LogMessage(
            seq=i,
            subject=m.subject,
            data=m.data,
            headers={**m.headers, "Nats-Msg-Id": m.msg_id},
            pending=len(outgoing) - i,
        )
        for i, m in enumerate(outgoing, start=1)
    ]
