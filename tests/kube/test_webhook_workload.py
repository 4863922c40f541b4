"""Kueue's Workload webhook integration tests, on the emulated API server.

Ported from Kueue test/integration/singlecluster/webhook/core/workload_test.go: a Workload created, or its spec
or status written, is stored or refused as Kueue's CRD (422 Invalid) and its ``vworkload.kb.io`` webhook (403
Forbidden, ``admission webhook "vworkload.kb.io" denied the request: ...``) refuse it, with Kueue's field paths.
The rules themselves are tested as tables in tests/unit/test_workload_webhook.py; here they meet the CRD's
schema and defaults on the way in, as in Kueue's envtest.
"""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources

NS = "default"
NAME = "workload-test"


def pod_set(name: str | None = "main", count: int = 1, **fields: Any) -> dict[str, Any]:
    """utiltestingapi.MakePodSet(name, count): one container ``c`` requesting nothing, restartPolicy Never."""
    container = {"name": "c", "image": "pause", "resources": {"requests": {}}}
    out: dict[str, Any] = {"count": count, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}
    if name is not None:
        out["name"] = name
    return {**out, **fields}


def workload(*pod_sets: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """utiltestingapi.MakeWorkload(NAME, NS): one pod set ``main`` of one pod unless given."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"podSets": list(pod_sets) or [pod_set()], **spec},
    }


def requesting(
    name: str, *, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None
) -> dict[str, Any]:
    ps = pod_set(name)
    resources_ = {**({"requests": requests} if requests else {}), **({"limits": limits} if limits else {})}
    ps["template"]["spec"]["containers"][0]["resources"] = resources_
    return ps


def pod_priority(name: str) -> dict[str, str]:
    return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}


INVALID, FORBIDDEN, STORED = 422, 403, None
WEBHOOK = 'admission webhook "vworkload.kb.io" denied the request: '

CREATE_CASES = [
    # "Should have valid PodSet when creating": (pod sets, count of each)
    ("podSets count less than 1", workload(*[]) | {"spec": {"podSets": []}}, INVALID, "spec.podSets"),
    ("podSets count at the maximum", workload(*[pod_set(f"ps{i}") for i in range(18)]), STORED, None),
    ("podSets count more than the maximum", workload(*[pod_set(f"ps{i}") for i in range(19)]), INVALID, "spec.podSets"),
    ("valid podSet, count can be 0", workload(*[pod_set(f"ps{i}", 0) for i in range(3)]), STORED, None),
    ("valid podSet", workload(*[pod_set(f"ps{i}", 3) for i in range(3)]), STORED, None),
    # "Should have valid values when creating"
    ("valid workload", workload(pod_set("driver"), pod_set("workers", 100)), STORED, None),
    ("invalid podSet name", workload(pod_set("@driver")), INVALID, "spec.podSets[0].name"),
    (
        "invalid priorityClassRef.name",
        workload(priorityClassRef=pod_priority("invalid_class"), priority=0),
        INVALID,
        "spec.priorityClassRef.name",
    ),
    (
        "invalid priorityClassRef.group",
        workload(priorityClassRef={"group": "test", "kind": "PriorityClass", "name": "low"}, priority=100),
        INVALID,
        "spec.priorityClassRef.group",
    ),
    (
        "invalid priorityClassRef.kind",
        workload(priorityClassRef={"group": "scheduling.k8s.io", "kind": "test", "name": "low"}, priority=100),
        INVALID,
        "spec.priorityClassRef.kind",
    ),
    (
        "incompatible priorityClassRef.kind (scheduling.k8s.io)",
        workload(
            priorityClassRef={"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "low"},
            priority=100,
        ),
        INVALID,
        "spec.priorityClassRef",
    ),
    (
        "incompatible priorityClassRef.kind (kueue.x-k8s.io)",
        workload(priorityClassRef={"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "low"}, priority=100),
        INVALID,
        "spec.priorityClassRef",
    ),
    ("omitted priorityClassRef is valid", workload(priority=0), STORED, None),
    (
        "priority should not be nil when priorityClassRef is set",
        workload(priorityClassRef=pod_priority("priority")),
        INVALID,
        "spec",
    ),
    ("invalid queueName", workload(queueName="@invalid"), INVALID, "spec.queueName"),
    (
        "should not request num-pods resource",
        workload(requesting("bad", requests={"pods": "1"})),
        FORBIDDEN,
        "spec.podSets[0].template.spec.containers[0].resources.requests[pods]",
    ),
    (
        "should not limit num-pods resource",
        workload(requesting("bad", limits={"pods": "1"})),
        FORBIDDEN,
        "spec.podSets[0].template.spec.containers[0].resources.limits[pods]",
    ),
    (
        "should not allow negative resource requests",
        workload(requesting("bad", requests={"cpu": "-1"})),
        FORBIDDEN,
        "spec.podSets[0].template.spec.containers[0].resources.requests[cpu]",
    ),
    (
        "invalid podSet minCount (negative)",
        workload(pod_set("ps1", 3, minCount=-1)),
        INVALID,
        "spec.podSets[0].minCount",
    ),
    ("invalid podSet minCount (too big)", workload(pod_set("ps1", 3, minCount=4)), INVALID, "spec.podSets[0]"),
    (
        "too many variable count podSets",
        workload(pod_set("ps1", 3, minCount=2), pod_set("ps2", 3, minCount=1)),
        FORBIDDEN,
        "spec.podSets",
    ),
    (
        "invalid maximumExexcutionTimeSeconds",
        workload(maximumExecutionTimeSeconds=0),
        INVALID,
        "spec.maximumExecutionTimeSeconds",
    ),
    ("valid maximumExexcutionTimeSeconds", workload(maximumExecutionTimeSeconds=1), STORED, None),
]


@pytest.mark.parametrize(
    ("obj", "status", "field"), [pytest.param(obj, status, field, id=name) for name, obj, status, field in CREATE_CASES]
)
async def test_kueue_s_create_cases(
    api: k8s_client.ApiClient, obj: dict[str, Any], status: int | None, field: str | None
) -> None:
    """A Workload created is stored, or refused with Kueue's status (422 from the CRD, 403 from the webhook) and
    the field path Kueue's refusal names first."""
    if status is None:
        await client.create_object(api, resources.WORKLOADS, namespace=NS, body=obj)
        return
    with pytest.raises(errors.ApiError) as refusal:
        await client.create_object(api, resources.WORKLOADS, namespace=NS, body=obj)
    assert refusal.value.status == status, refusal.value.body
    if status == INVALID:
        assert field in [cause["field"] for cause in refusal.value.body["details"]["causes"]], refusal.value.body
    else:
        assert refusal.value.message.startswith(f"{WEBHOOK}{field}:"), refusal.value.message


NOW = "2026-01-01T00:00:00Z"


def assignment(name: str = "main", *, count: int = 1, **fields: Any) -> dict[str, Any]:
    """utiltestingapi.MakePodSetAssignment(name): no flavors, no usage, count 1."""
    return {"name": name, "flavors": {}, "resourceUsage": {}, "count": count, **fields}


def admission(cluster_queue: str = "cq", *assignments: dict[str, Any]) -> dict[str, Any]:
    """utiltestingapi.MakeAdmission(cq): one assignment for ``main`` unless given."""
    return {"clusterQueue": cluster_queue, "podSetAssignments": list(assignments) or [assignment()]}


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": "ByTest", "message": "by test", "lastTransitionTime": NOW}


async def create(api: k8s_client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.create_object(api, resources.WORKLOADS, namespace=NS, body=obj)


async def write_status(api: k8s_client.ApiClient, status: dict[str, Any]) -> dict[str, Any]:
    """A merge patch of the Workload's status subresource, as Kueue's controllers write it."""
    where = {"namespace": NS, "name": NAME, "subresource": "status"}
    return await client.patch_object(api, resources.WORKLOADS, **where, patch={"status": status})


async def reserve_quota(api: k8s_client.ApiClient, admitted: dict[str, Any] | None = None) -> dict[str, Any]:
    """util.SetQuotaReservation and SyncAdmittedConditionForWorkloads: the admission, QuotaReserved and Admitted."""
    conditions = [condition("QuotaReserved"), condition("Admitted")]
    return await write_status(api, {"admission": admitted or admission(), "conditions": conditions})


async def expect(status: int | None, write: Any) -> str:
    """Run ``write`` (a coroutine); it is stored when ``status`` is None, else refused with that status: its
    message."""
    if status is None:
        await write
        return ""
    with pytest.raises(errors.ApiError) as refusal:
        await write
    assert refusal.value.status == status, refusal.value.body
    return str(refusal.value.message)


ADMISSION_CASES = [
    # "Should have valid values when setting Admission"
    ("invalid clusterQueue name", [pod_set()], admission("@invalid"), INVALID, "status.admission.clusterQueue"),
    (
        "invalid podSet name in status assignment",
        [pod_set()],
        admission("cluster-queue", assignment("@invalid")),
        INVALID,
        "status.admission.podSetAssignments[0].name",
    ),
    (
        "mismatched names in admission with names in podSets",
        [pod_set("main2"), pod_set("main1")],
        admission("cluster-queue", assignment("main1"), assignment("main2"), assignment("main3")),
        INVALID,
        "<nil>",
    ),
    (
        "assignment usage should be divisible by count",
        [requesting("main", requests={"cpu": "1"}) | {"count": 3}],
        admission("cluster-queue", assignment(count=3, flavors={"cpu": "flv"}, resourceUsage={"cpu": "1"})),
        FORBIDDEN,
        "status.admission.podSetAssignments[0].resourceUsage[cpu]",
    ),
    *[
        (
            f"{state} delayedTopologyRequest",
            [requesting("main", requests={"cpu": "1"}) | {"count": 3}],
            admission(
                "cluster-queue",
                assignment(count=3, flavors={"cpu": "flv"}, resourceUsage={"cpu": "3"}, delayedTopologyRequest=state),
            ),
            None,
            None,
        )
        for state in ("Pending", "Ready")
    ],
    (
        "invalid delayedTopologyRequest",
        [requesting("main", requests={"cpu": "1"}) | {"count": 3}],
        admission(
            "cluster-queue",
            assignment(count=3, flavors={"cpu": "flv"}, resourceUsage={"cpu": "3"}, delayedTopologyRequest="invalid"),
        ),
        INVALID,
        "status.admission.podSetAssignments[0].delayedTopologyRequest",
    ),
]


@pytest.mark.parametrize(
    ("pod_sets", "admitted", "status", "field"),
    [pytest.param(*case[1:], id=case[0]) for case in ADMISSION_CASES],
)
async def test_kueue_s_admission_cases(
    api: k8s_client.ApiClient,
    pod_sets: list[dict[str, Any]],
    admitted: dict[str, Any],
    status: int | None,
    field: str | None,
) -> None:
    """A quota reservation written to the status is stored, or refused with Kueue's status and field path."""
    await create(api, workload(*pod_sets))
    message = await expect(status, reserve_quota(api, admitted))
    if status == FORBIDDEN:
        assert message.startswith(f"{WEBHOOK}{field}:"), message
    elif status == INVALID:
        assert f"{field}:" in message, message


CHECK_CASES = [
    # "Should have valid values when setting AdmissionCheckState": each refused 403
    (
        "mismatched names in podSetUpdates with names in podSets",
        [pod_set("first"), pod_set("second")],
        [{"name": "first"}, {"name": "third"}],
        "status.admissionChecks[0].podSetUpdates",
    ),
    (
        "invalid label name of podSetUpdate",
        [pod_set()],
        [{"name": "main", "labels": {"@abc": "foo"}}],
        "status.admissionChecks[0].podSetUpdates[0].labels",
    ),
    (
        "invalid node selector name of podSetUpdate",
        [pod_set()],
        [{"name": "main", "nodeSelector": {"@abc": "foo"}}],
        "status.admissionChecks[0].podSetUpdates[0].nodeSelector",
    ),
    (
        "invalid label value of podSetUpdate",
        [pod_set()],
        [{"name": "main", "labels": {"foo": "@abc"}}],
        "status.admissionChecks[0].podSetUpdates[0].labels",
    ),
]


@pytest.mark.parametrize(
    ("pod_sets", "updates", "field"), [pytest.param(*case[1:], id=case[0]) for case in CHECK_CASES]
)
async def test_kueue_s_admission_check_state_cases(
    api: k8s_client.ApiClient, pod_sets: list[dict[str, Any]], updates: list[dict[str, Any]], field: str
) -> None:
    """A Ready admission check's podSetUpdates that name no pod set or carry bad labels are refused 403."""
    await create(api, workload(*pod_sets))
    check = {"name": "check", "state": "Ready", "message": "", "lastTransitionTime": NOW, "podSetUpdates": updates}
    message = await expect(FORBIDDEN, write_status(api, {"admissionChecks": [check]}))
    assert message.startswith(f"{WEBHOOK}{field}"), message


async def test_invalid_reclaimable_pods(api: k8s_client.ApiClient) -> None:
    """workload_test.go "invalid reclaimablePods": more than the pod set's count, and a pod set it lacks."""
    await create(api, workload(pod_set("ps1", 3)))
    reclaimable = [{"name": "ps1", "count": 4}, {"name": "ps2", "count": 1}]
    message = await expect(FORBIDDEN, write_status(api, {"reclaimablePods": reclaimable}))
    assert message == (
        f"{WEBHOOK}[status.reclaimablePods[ps1].count: Invalid value: 4: should be less or equal to 3, "
        'status.reclaimablePods[ps2].name: Unsupported value: "ps2": supported values: "ps1"]'
    )


async def test_a_status_reserving_quota_without_admission_is_refused(api: k8s_client.ApiClient) -> None:
    """workload_test.go "Should refuse a status update reserving quota with no admission"."""
    await create(api, workload())
    message = await expect(FORBIDDEN, write_status(api, {"conditions": [condition("QuotaReserved")]}))
    assert (
        message == f"{WEBHOOK}status.admission: Required value: must be set while the QuotaReserved condition is true"
    )


def mutate(**spec: Any) -> Any:
    """An update of the spec: each field set, or removed when None."""

    def change(obj: dict[str, Any]) -> None:
        for field, value in spec.items():
            if value is None:
                obj["spec"].pop(field, None)
            else:
                obj["spec"][field] = value

    return change


def renamed_container(obj: dict[str, Any]) -> None:
    obj["spec"]["podSets"] = [
        pod_set() | {"template": {"spec": {"containers": [{"name": "c-after", "image": "pause"}]}}}
    ]


def class_renamed(obj: dict[str, Any]) -> None:
    obj["spec"]["priorityClassRef"]["name"] = "low"
    obj["spec"]["priority"] = 100


def scaled_to(count: int) -> Any:
    def change(obj: dict[str, Any]) -> None:
        obj["spec"]["podSets"][0]["count"] = count

    return change


WPC = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}
PC = {"group": "scheduling.k8s.io", "kind": "PriorityClass"}

UPDATE_CASES = [
    # "Validate Workload on update": (spec, reserve quota first, the update, the answer)
    ("podSets should not be updated when has quota reservation: count", {}, True, scaled_to(2), FORBIDDEN),
    ("podSets should not be updated: podSpec", {}, True, renamed_container, FORBIDDEN),
    ("queueName can be updated when not admitted", {"queueName": "q1"}, False, mutate(queueName="q2"), None),
    ("queueName can be updated when admitting", {}, False, mutate(queueName="q"), None),
    ("queueName should not be updated once admitted", {"queueName": "q1"}, True, mutate(queueName="q2"), INVALID),
    ("updating podSets before setting reserve quota for workload", {}, False, renamed_container, None),
    ("Should forbid the change of spec.podSet", {}, True, scaled_to(10), FORBIDDEN),
    ("can add maximum execution time when not admitted", {}, False, mutate(maximumExecutionTimeSeconds=1), None),
    (
        "can update maximum execution time when not admitted",
        {"maximumExecutionTimeSeconds": 1},
        False,
        mutate(maximumExecutionTimeSeconds=2),
        None,
    ),
    ("cannot add maximum execution time when admitted", {}, True, mutate(maximumExecutionTimeSeconds=1), INVALID),
    (
        "cannot update maximum execution time when admitted",
        {"maximumExecutionTimeSeconds": 1},
        True,
        mutate(maximumExecutionTimeSeconds=2),
        INVALID,
    ),
    ("Should allow to change priority when QuotaReserved=false", {}, False, mutate(priority=10), None),
    (
        "Should allow to change priority with priorityClassRef",
        {"priority": 0, "priorityClassRef": {**PC, "name": "low"}},
        False,
        mutate(priority=10),
        None,
    ),
    (
        "can set workload priorityClassRef when QuotaReserved=false",
        {},
        False,
        mutate(priorityClassRef={**WPC, "name": "low"}, priority=100),
        None,
    ),
    (
        "can't set workload priority class when QuotaReserved=true",
        {},
        True,
        mutate(priorityClassRef={**WPC, "name": "low"}, priority=100),
        INVALID,
    ),
    *[
        (
            f"can update {what} priority class when QuotaReserved={reserved}",
            {"priorityClassRef": {**ref, "name": "high"}, "priority": 1000},
            reserved,
            class_renamed,
            INVALID if reserved and ref is PC else None,
        )
        for what, ref in (("workload", WPC), ("pod", PC))
        for reserved in (False, True)
    ],
    *[
        (
            f"can delete {what} priority class when QuotaReserved={reserved}",
            {"priorityClassRef": {**ref, "name": "high"}, "priority": 1000},
            reserved,
            mutate(priorityClassRef=None, priority=None),
            INVALID if reserved else None,
        )
        for what, ref in (("workload", WPC), ("pod", PC))
        for reserved in (False, True)
    ],
    (
        "can set pod priority class QuotaReserved=false",
        {},
        False,
        mutate(priorityClassRef={**PC, "name": "low"}, priority=100),
        None,
    ),
    (
        "can't set pod priority class when QuotaReserved=true",
        {},
        True,
        mutate(priorityClassRef={**PC, "name": "low"}, priority=100),
        INVALID,
    ),
]


@pytest.mark.parametrize(
    ("spec", "reserved", "change", "status"), [pytest.param(*case[1:], id=case[0]) for case in UPDATE_CASES]
)
async def test_kueue_s_update_cases(
    api: k8s_client.ApiClient, spec: dict[str, Any], reserved: bool, change: Any, status: int | None
) -> None:
    """An update of the Workload (PUT of the main resource, as Go's client.Update) is stored or refused as Kueue's
    CRD (422: its rules on the whole Workload with its status) and webhook (403) answer it."""
    await create(api, workload(**spec))
    if reserved:
        await reserve_quota(api)
    stored = await client.get_object(api, resources.WORKLOADS, namespace=NS, name=NAME)
    updated = copy.deepcopy(stored)
    change(updated)
    await expect(status, client.replace_object(api, resources.WORKLOADS, namespace=NS, name=NAME, body=updated))


async def test_an_admitted_workload_keeps_its_queue_name(api: k8s_client.ApiClient) -> None:
    """workload_test.go "Should forbid the change of spec.queueName of an admitted workload" and "Should prevent
    removing queueName on admitted workload (issue 12552)": both refused 422 by the CRD's rule on the Workload."""
    await create(api, workload(queueName="queue1"))
    await reserve_quota(api)
    stored = await client.get_object(api, resources.WORKLOADS, namespace=NS, name=NAME)
    for change in (mutate(queueName="queue2"), mutate(queueName=None)):
        updated = copy.deepcopy(stored)
        change(updated)
        message = await expect(
            INVALID, client.replace_object(api, resources.WORKLOADS, namespace=NS, name=NAME, body=updated)
        )
        assert message.endswith('<nil>: Invalid value: "object": queueName is immutable while workload quota reserved')


async def test_an_admission_once_set_is_not_changed(api: k8s_client.ApiClient) -> None:
    """workload_test.go "Should forbid the change of status.admission" and "admission should not be updated once
    set": another ClusterQueue, or other assignments, are refused 403."""
    await create(api, workload())
    await reserve_quota(api, admission("cluster-queue"))
    message = await expect(FORBIDDEN, write_status(api, {"admission": admission("foo-cluster-queue")}))
    assert message.startswith(f"{WEBHOOK}status.admission"), message
    other = admission("cluster-queue", assignment(flavors={"on-demand": "5"}, resourceUsage={"on-demand": "1"}))
    message = await expect(FORBIDDEN, write_status(api, {"admission": other}))
    assert message.startswith(f"{WEBHOOK}status.admission"), message


@pytest.mark.parametrize(("before", "after", "status"), [(1, 2, None), (2, 1, FORBIDDEN)])
async def test_reclaimable_pods_go_up_not_down_while_quota_is_reserved(
    api: k8s_client.ApiClient, before: int, after: int, status: int | None
) -> None:
    """workload_test.go "reclaimable pod count can change up" and "... cannot change down"."""
    await create(api, workload(pod_set("ps1", 3), pod_set("ps2", 3)))
    await write_status(api, {"reclaimablePods": [{"name": "ps1", "count": before}]})
    await reserve_quota(api, admission("cluster-queue", {"name": "ps1"}, {"name": "ps2"}))
    changed = [{"name": "ps1", "count": after}] + ([{"name": "ps2", "count": 1}] if status is None else [])
    await expect(status, write_status(api, {"reclaimablePods": changed}))


async def test_a_ready_check_s_pod_set_updates_are_immutable(api: k8s_client.ApiClient) -> None:
    """workload_test.go "podSetUpdates should be immutable when state is ready"; its message may change
    ("should change other fields of admissionchecks when podSetUpdates is immutable")."""
    await create(api, workload(pod_set("first"), pod_set("second")))

    def check(message: str, value: str) -> dict[str, Any]:
        updates = [{"name": "first", "labels": {"foo": value}}, {"name": "second"}]
        return {
            "name": "ac1",
            "state": "Ready",
            "message": message,
            "lastTransitionTime": NOW,
            "podSetUpdates": updates,
        }

    await write_status(api, {"admissionChecks": [check("old", "bar")]})
    await write_status(api, {"admissionChecks": [check("new", "bar")]})
    message = await expect(FORBIDDEN, write_status(api, {"admissionChecks": [check("new", "baz")]}))
    assert message.startswith(f"{WEBHOOK}status.admissionChecks[0].podSetUpdates"), message


async def test_a_single_pod_set_is_named_main(api: k8s_client.ApiClient) -> None:
    """workload_test.go "Should set default podSet name" and "Shouldn't set podSet name if multiple": the CRD
    names a lone unnamed pod set ``main``; two unnamed ones would share the name, which is refused."""
    created = await create(api, workload(pod_set(None)))
    assert [ps["name"] for ps in created["spec"]["podSets"]] == ["main"]
    await client.delete_object(api, resources.WORKLOADS, namespace=NS, name=NAME)
    await expect(INVALID, create(api, workload(pod_set(None), pod_set(None))))


def universal_slice(suffix: int, levels: tuple[str, ...] = ("block", "rack")) -> dict[str, Any]:
    """workload_test.go validSliceFor: one domain of one pod, a universal value per level."""
    return {
        "domainCount": 1,
        "valuesPerLevel": [{"universal": f"{level}-{suffix}"} for level in levels],
        "podCounts": {"universal": 1},
    }


TWO_LEVELS = ["block", "rack"]
TOPOLOGY_CASES = [
    (
        "accepts a TopologyAssignment combining various item counts & patterns of subfield presence",
        [
            {
                "domainCount": 3,
                "valuesPerLevel": [
                    {"universal": "block-1"},
                    {"individual": {"prefix": "rack-1-", "roots": ["1", "2", "3"]}},
                ],
                "podCounts": {"universal": 1},
            },
            {
                "domainCount": 4,
                "valuesPerLevel": [
                    {"individual": {"prefix": "block", "roots": ["-", "-", "-", "-"], "suffix": "2"}},
                    {"individual": {"roots": ["r1", "r2", "r3", "r4"]}},
                ],
                "podCounts": {"individual": [10, 20, 30, 40]},
            },
            universal_slice(3),
            universal_slice(4),
            universal_slice(5),
        ],
        None,
    ),
    (
        "rejects a slice with wrong number of levels",
        [universal_slice(1), universal_slice(2, ("block",)), universal_slice(3)],
        "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
    ),
    (
        "rejects a slice with wrong number of individual pod counts",
        [
            universal_slice(1),
            {
                "domainCount": 3,
                "valuesPerLevel": [{"universal": "block-2"}, {"universal": "rack-2"}],
                "podCounts": {"individual": [10, 20]},
            },
            universal_slice(3),
        ],
        "podCounts.individual must have length equal to domainCount",
    ),
    (
        "rejects a slice has wrong number of individual assignment values",
        [
            universal_slice(1),
            {
                "domainCount": 3,
                "valuesPerLevel": [{"universal": "block-2"}, {"individual": {"roots": ["rack2-1", "rack2-2"]}}],
                "podCounts": {"individual": [10, 20, 30]},
            },
            universal_slice(3),
        ],
        "valuesPerLevel.individual, if set, must have roots of length equal to domainCount of this TopologyAssignmentSlice",
    ),
]


@pytest.mark.parametrize(("slices", "refusal"), [pytest.param(*case[1:], id=case[0]) for case in TOPOLOGY_CASES])
async def test_kueue_s_topology_assignment_rules(
    api: k8s_client.ApiClient, slices: list[dict[str, Any]], refusal: str | None
) -> None:
    """workload_test.go "TopologyAssignment validation": the CRD's rules on a topology assignment's slices."""
    await create(api, workload(requesting("ps1", requests={"cpu": "1"}) | {"count": 3}, queueName="lq1"))
    topology = {"levels": TWO_LEVELS, "slices": slices}
    admitted = {"clusterQueue": "cq1", "podSetAssignments": [{"name": "ps1", "topologyAssignment": topology}]}
    message = await expect(INVALID if refusal else None, write_status(api, {"admission": admitted}))
    assert refusal is None or refusal in message, message


V1BETA1_CASES = [
    # "Workload v1beta1 CEL validation": (v1beta2 spec, reserve quota, the v1beta1 change, refused)
    (
        "can toggle active on workload without priorityClassRef when QuotaReserved=true",
        {},
        True,
        {"active": False},
        False,
    ),
    (
        "can toggle active on workload without priorityClassRef when QuotaReserved=false",
        {},
        False,
        {"active": False},
        False,
    ),
    (
        "can toggle active on workload with pod priorityClassRef when QuotaReserved=true",
        {"priorityClassRef": {**PC, "name": "default"}, "priority": 0},
        True,
        {"active": False},
        False,
    ),
    (
        "can't change priorityClassSource via v1beta1 when QuotaReserved=true",
        {"priorityClassRef": {**PC, "name": "default"}, "priority": 0},
        True,
        {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
        True,
    ),
    (
        "can change priorityClassSource via v1beta1 when QuotaReserved=false",
        {"priorityClassRef": {**PC, "name": "default"}, "priority": 0},
        False,
        {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
        False,
    ),
    (
        "can toggle active on workload with workload priorityClassRef when QuotaReserved=true",
        {"priorityClassRef": {**WPC, "name": "default"}, "priority": 0},
        True,
        {"active": False},
        False,
    ),
    (
        "can't change priorityClassName via v1beta1 when QuotaReserved=true and source is pod priorityClass",
        {"priorityClassRef": {**PC, "name": "default"}, "priority": 0},
        True,
        {"priorityClassName": "other"},
        True,
    ),
    (
        "can change priorityClassName via v1beta1 when QuotaReserved=true and source is workloadpriorityclass",
        {"priorityClassRef": {**WPC, "name": "default"}, "priority": 0},
        True,
        {"priorityClassName": "other"},
        False,
    ),
]


@pytest.mark.parametrize(
    ("spec", "reserved", "change", "refused"), [pytest.param(*case[1:], id=case[0]) for case in V1BETA1_CASES]
)
async def test_kueue_s_v1beta1_priority_rules(
    cluster: Any, api: k8s_client.ApiClient, spec: dict[str, Any], reserved: bool, change: dict[str, Any], refused: bool
) -> None:
    """A Workload created through v1beta2 and updated through v1beta1 (Go's client.Update of a v1beta1 object):
    its priority class stays while it holds quota, as Kueue's CRD rules say once converted."""
    await create(api, workload(**spec))
    if reserved:
        await reserve_quota(api)
    url = f"{cluster.url}/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads/{NAME}"
    async with aiohttp.ClientSession() as session:
        async with session.get(url) as got:
            assert got.status == 200
            old = await got.json()
        async with session.put(url, json={**old, "spec": {**old["spec"], **change}}) as put:
            answer = await put.json()
    assert put.status == (422 if refused else 200), answer
