"""Pods Kueue's webhook did not mark are never taken over by the watcher (pod_controller.go Skip).

Kueue's pod reconciler skips a pod without the ``kueue.x-k8s.io/managed: "true"`` label, which only its
webhook (or a serving parent's template) puts on a pod, at creation. So a pod created while its namespace
was outside ``managedJobsNamespaceSelector`` runs unmanaged for good, even once the namespace is selected;
and with the pod integration enabled only through ``deployment`` (``pod`` not listed), a plain pod is
skipped unless a parent marked it (``kueue.x-k8s.io/pod-suspending-parent``). Before, the watcher took any
pod with the queue-name label: relabelling the namespace gave a running, never admitted pod a Workload.

The watcher converts in order (the initial lists, then each event; a namespace change converts every pod
again, by name, single pods before groups), so a marker pod named last that gets its Workload shows the
pods before it were converted too.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import manager_config, models, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import pods, webhooks, workloads
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import events_of, running, wait_for

pytestmark = pytest.mark.timeout(60)

SELECTED = {"kueue": "enabled"}
CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def configuration(*frameworks: str, selector: bool = False) -> manager_config.ManagerConfig:
    text = CONFIG + "integrations:\n  frameworks:\n" + "".join(f"  - {name}\n" for name in frameworks)
    if selector:
        text += "managedJobsNamespaceSelector:\n  matchLabels:\n    kueue: enabled\n"
    return manager_config.parse(text, source="test")


def pod(name: str, namespace: str, *, group: str = "", total: int = 0, **labels: str) -> dict[str, Any]:
    """A queue-labelled pod as its user writes it (one of pod group ``group`` of ``total`` pods)."""
    annotations = {pods.GROUP_TOTAL_COUNT_ANNOTATION: str(total)} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                workloads.QUEUE_LABEL: "user-queue",
                **({pods.GROUP_NAME_KEY: group} if group else {}),
                **labels,
            },
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"},
    }


async def create(api: Any, obj: dict[str, Any]) -> dict[str, Any]:
    return await kube.create_object(api, resources.PODS, namespace=obj["metadata"]["namespace"], body=obj)


def owners(facts: list[types.WorkloadObserved]) -> list[str]:
    return [f.workload.metadata.name for f in facts]


async def test_pods_created_outside_the_selector_are_not_taken_over_once_it_selects_them(bus: MemoryBus) -> None:
    """A pod and a group member created in namespace ``team`` before it carried the selector's label run
    ungated and unmarked; labelling ``team`` gives them no Workload: the single pod keeps running unmanaged,
    and the group, whose other member came after, stays incomplete (the unmarked pod is not a member)."""
    config = configuration("pod", selector=True)
    selector = config.managed_jobs_namespace_selector
    assert selector == models.LabelSelector(match_labels=SELECTED)
    async with serve_emulator(
        bookmark_interval=0.2,
        managed_kinds=webhooks.enabled_kinds(config.frameworks),
        managed_jobs_namespace_selector=selector,
    ) as emu:
        api = await kube.make_api_client(server=emu.url)
        try:
            team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
            await kube.apply_manifest(api, team)
            running_pod = await create(api, pod("a-running", "team"))
            early_member = await create(api, pod("a-mixed-0", "team", group="a-mixed", total=2))
            for created in (running_pod, early_member):  # the webhook left them alone: they run
                assert not pods.is_gated(created) and workloads.MANAGED_LABEL not in created["metadata"]["labels"]
            watcher = Watcher(bus=bus, api=api, config=config)
            async with running(watcher.run()):
                team["metadata"]["labels"] = SELECTED
                await kube.apply_manifest(api, team)
                late_member = await create(api, pod("a-mixed-1", "team", group="a-mixed", total=2))
                marker = await create(api, pod("z-marker-0", "team", group="z-marker", total=1))
                assert pods.is_gated(late_member) and pods.is_gated(marker)  # selected now: marked and gated
                await wait_for(bus, types.WorkloadObserved, workload__metadata__name="z-marker")
                observed = await events_of(bus, types.WorkloadObserved)
        finally:
            await api.close()
    assert owners(observed) == ["z-marker"]


async def test_with_the_pod_integration_implied_only_a_parents_pods_are_managed(bus: MemoryBus) -> None:
    """``integrations.frameworks: [deployment]`` enables the pod webhook and watch (Kueue's
    ImplicitlyEnabledFrameworkNames), but Kueue's pod reconciler then skips a pod without the
    ``kueue.x-k8s.io/pod-suspending-parent`` annotation: a plain queue-labelled pod is gated by the webhook
    and gets no Workload, as in Kueue; a Deployment's pod gets its own."""
    config = configuration("deployment")
    async with serve_emulator(bookmark_interval=0.2, managed_kinds=webhooks.enabled_kinds(config.frameworks)) as emu:
        api = await kube.make_api_client(server=emu.url)
        try:
            plain = await create(api, pod("a-plain", "default"))
            assert pods.is_gated(plain) and plain["metadata"]["labels"][workloads.MANAGED_LABEL] == "true"
            # as a Deployment's ReplicaSet makes it from the template Kueue's Deployment webhook marked
            of_deployment = pod("z-web", "default", **{workloads.MANAGED_LABEL: "true"})
            of_deployment["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] = "deployment"
            assert pods.is_gated(await create(api, of_deployment))
            watcher = Watcher(bus=bus, api=api, config=config)
            async with running(watcher.run()):
                [fact] = await wait_for(bus, types.WorkloadObserved, workload__owner__name="z-web")
                observed = await events_of(bus, types.WorkloadObserved)
        finally:
            await api.close()
    assert owners(observed) == [fact.workload.metadata.name]
