"""The demo's timeline shows what the services fold: a record the batch verifier refuses admits nothing.

A fault run re-published a decision record with a new Msg-Id: every service refused it
(``decision_orphaned``), but the timeline printed its admission a second time.
"""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from kueue_es.demo import TimelinePrinter
from kueue_es.events import subjects, types
from kueue_es.events.bus import base
from kueue_es.events.bus.memory import MemoryBus
from tests import builders
from tests.integration.harness import commit


async def test_a_refused_duplicate_record_is_shown_refused_not_admitted() -> None:
    bus = MemoryBus()
    fact = builders.parse(builders.workload("wl1", cpu="1"))
    fact = types.WorkloadObserved(workload=fact)
    await bus.publish(subjects.fact_message(fact, version="1"))
    ref = types.WorkloadRef(namespace="default", name="wl1", uid=fact.workload.metadata.uid)
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 1000}, count=1)
    reserved = types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1)
    [seq] = await commit(bus, types.admitted(reserved, at_ms=1))
    record = await bus.get(seq)
    again = base.OutgoingMessage(
        subject=record.subject,
        data=record.data,
        headers={k: v for k, v in record.headers.items() if not k.lower().startswith("nats-")},
        msg_id=record.headers["Nats-Msg-Id"] + ":dup",
    )
    await bus.publish(again)
    out = io.StringIO()
    printer = TimelinePrinter(bus=bus, console=Console(file=out, width=250, color_system=None))
    task = asyncio.create_task(printer.follow())
    try:
        await printer.wait_until(lambda: "refused" in out.getvalue(), timeout=5)
    finally:
        task.cancel()
    lines = out.getvalue().splitlines()
    assert sum("admitted" in line for line in lines) == 1, lines
    assert any("refused" in line and subjects.HEADS.split(".")[0] in line for line in lines), lines


async def test_a_rejections_field_is_shown_whole_not_read_as_markup() -> None:
    """A rejected Job's field ``metadata.labels[kueue.x-k8s.io/priority-class]`` is printed as it is: rich took
    its ``[...]`` for a style and dropped it (found by a new user's trial)."""
    bus = MemoryBus()
    field = "metadata.labels[kueue.x-k8s.io/priority-class]"
    rejected = types.ObjectRejected(
        kind="Job", namespace="default", name="wpc-job", field=field, problem='WorkloadPriorityClass "x" not found'
    )
    await bus.publish(subjects.fact_message(rejected))
    out = io.StringIO()
    printer = TimelinePrinter(bus=bus, console=Console(file=out, width=250, color_system=None))
    task = asyncio.create_task(printer.follow())
    try:
        await printer.wait_until(lambda: "rejected" in out.getvalue(), timeout=5)
    finally:
        task.cancel()
    assert f"Job default/wpc-job: {field}: WorkloadPriorityClass" in out.getvalue()


def test_the_summary_names_evictions_by_reason_not_all_as_preemptions() -> None:
    """A NodeFailures eviction is not a preemption: the closing line and ``demo --keep``'s stop line say so (found by
    a new user's trial, which saw "1 evicted by preemption" for a failed node)."""
    from pathlib import Path

    from kueue_es.demo import _kept_stop_line

    printer = TimelinePrinter(bus=MemoryBus(), console=Console(file=io.StringIO()))
    for name, reason in [("a", "Preempted"), ("b", "NodeFailures"), ("c", "Preempted"), ("d", "PodsReadyTimeout")]:
        ref = types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}")
        printer.count(types.EvictionRequested(workload=ref, cluster_queue="cq", reason=reason, message="", at_ms=1))
    text = "2 evicted by preemption, 1 evicted (NodeFailures), 1 evicted (PodsReadyTimeout)"
    assert printer.evictions_text() == text
    assert text in _kept_stop_line(printer, Path("/tmp/run"))


def test_no_eviction_is_zero_by_preemption() -> None:
    printer = TimelinePrinter(bus=MemoryBus(), console=Console(file=io.StringIO()))
    ref = types.WorkloadRef(namespace="default", name="n", uid="uid-n")
    printer.count(types.EvictionRequested(workload=ref, cluster_queue="cq", reason="NodeFailures", message="", at_ms=1))
    assert printer.evictions_text() == "0 evicted by preemption, 1 evicted (NodeFailures)"
