"""The steps of Kueue's test/e2e/singlecluster/baseline/visibility_test.go (Describe "Kueue visibility server"), run
by tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep`` with Kueue's e2e manager Configuration.

Kueue reads ``visibility.kueue.x-k8s.io`` with its clientset (``VisibilityV1beta2()``/``VisibilityV1beta1()``
``GetPendingWorkloadsSummary``); here the same paths go to the demo's API server, which proxies them to the
visibility service through its APIServices (kueue_es/sim/aggregator.py): the administrator's reads through the
tests' API client (a poll each half second), the RBAC cases through the real kubectl with ``get --raw PATH --as
USER`` (client-go's impersonation, what Kueue's ``impersonatedVisibilityClient`` does), so the API server
authorizes them by RBAC (kueue_es/sim/rbac.py) before it proxies them, as kube-apiserver does.

Kueue compares the items ignoring each workload's name, creation timestamp and owner reference UID (made by the
server); so do the steps (:func:`_items`).

Kueue's cases run one by one, each with new namespaces, and impersonate one subject, the ServiceAccount ``default``
of Kueue's namespace; here they run at once, so each RBAC step binds and impersonates a ServiceAccount of its own
(:func:`_subject`), and a ClusterRoleBinding of one step grants nothing to another's subject.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from tests.e2e.kueue_e2e import (
    E2E,
    FOREVER,
    PRIORITY_CLASS_LABEL,
    Step,
    cluster_queue,
    flavor,
    is_true,
    job,
    local_queue,
    namespace,
    priority_class,
)
from tests.e2e.waiting import eventually as _eventually

GROUP = "visibility.kueue.x-k8s.io"
KUEUE_NS = "kueue-system"  # util.GetKueueNamespace(): where Kueue's impersonated ServiceAccount lives
HIGH, MID, LOW = 100, 75, 50  # the values of Kueue's WorkloadPriorityClasses high-, mid- and low-<nsA>


# -- the reads ---------------------------------------------------------------------------------------------------------


def cq_path(cq: str, version: str = "v1beta2") -> str:
    """ClusterQueues().GetPendingWorkloadsSummary(cq)."""
    return f"/apis/{GROUP}/{version}/clusterqueues/{cq}/pendingworkloads"


def lq_path(ns: str, lq: str, version: str = "v1beta2") -> str:
    """LocalQueues(ns).GetPendingWorkloadsSummary(lq)."""
    return f"/apis/{GROUP}/{version}/namespaces/{ns}/localqueues/{lq}/pendingworkloads"


async def read(e2e: E2E, path: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of the administrator's GET of ``path``, errors included."""
    try:
        response = await e2e.api.call_api(
            path, "GET", header_params={"Accept": "application/json"}, _preload_content=False
        )
        return response.status, json.loads(await response.read())
    except ApiException as exc:
        return int(exc.status or 0), json.loads(exc.body) if exc.body else {}


async def summary(e2e: E2E, path: str) -> list[dict[str, Any]]:
    """The items of the PendingWorkloadsSummary at ``path`` (``g.Expect(err).NotTo(HaveOccurred())``), checked to be
    of the path's version."""
    status, body = await read(e2e, path)
    assert status == 200, f"GET {path}: {status} {body}"
    version = path.split("/")[3]
    assert (body.get("kind"), body.get("apiVersion")) == ("PendingWorkloadsSummary", f"{GROUP}/{version}"), body
    return list(body.get("items") or [])


def _items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items as Kueue compares them (pendingWorkloadsCmpOpts): no name, creationTimestamp or owner UID."""
    out = []
    for found in items:
        metadata = found.get("metadata") or {}
        assert metadata.get("name") and metadata.get("creationTimestamp"), found  # made by the server
        owners = [{k: v for k, v in ref.items() if k != "uid"} for ref in metadata.get("ownerReferences") or []]
        out.append(
            {
                "namespace": metadata.get("namespace"),
                "ownerReferences": owners,
                "priority": found.get("priority"),
                "positionInLocalQueue": found.get("positionInLocalQueue"),
                "positionInClusterQueue": found.get("positionInClusterQueue"),
                "localQueueName": found.get("localQueueName"),
            }
        )
    return out


def pending(ns: str, job_name: str, priority: int, lq: str, *, in_lq: int, in_cq: int) -> dict[str, Any]:
    """A visibility.PendingWorkload Kueue expects, with defaultOwnerReferenceForJob(job_name)."""
    return {
        "namespace": ns,
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name}],
        "priority": priority,
        "positionInLocalQueue": in_lq,
        "positionInClusterQueue": in_cq,
        "localQueueName": lq,
    }


async def expect_items(e2e: E2E, path: str, want: list[dict[str, Any]], *, timeout: float = 90) -> None:
    """Eventually the summary at ``path`` holds ``want`` (BeComparableTo with pendingWorkloadsCmpOpts)."""

    async def current() -> list[dict[str, Any]]:
        return _items(await summary(e2e, path))

    await _eventually(current, lambda got: got == want, what=f"{path} is {want}", timeout=timeout, interval=0.5)


async def expect_count(e2e: E2E, path: str, count: int, *, timeout: float = 90) -> None:
    """Eventually the summary at ``path`` has ``count`` items (BeEmpty, HaveLen)."""

    async def current() -> list[dict[str, Any]]:
        return await summary(e2e, path)

    await _eventually(
        current, lambda got: len(got) == count, what=f"{path} has {count} items", timeout=timeout, interval=0.5
    )


def _subject(ns: str) -> tuple[str, str]:
    """(ServiceAccount name, the user kubectl impersonates) of a step: Kueue's is ``default`` of its namespace; the
    steps run at once, so each has its own (module docstring)."""
    name = f"visibility-{ns}"
    return name, f"system:serviceaccount:{KUEUE_NS}:{name}"


async def impersonated(e2e: E2E, user: str, path: str) -> tuple[str, str]:
    """``kubectl get --raw PATH --as USER``: ("OK", body) or the error's (reason, message) as kubectl prints a
    Status (``Error from server (Forbidden): ...``)."""
    code, out, err = await e2e.kubectl.run("get", "--raw", path, "--as", user)
    if code == 0:
        return "OK", out
    found = re.search(r"Error from server \((\w+)\): (.*)", err)
    assert found is not None, f"kubectl get --raw {path} --as {user}: {err}"
    return found.group(1), found.group(2).strip()


async def expect_not_found(e2e: E2E, user: str, path: str, resource: str, name: str) -> None:
    """BeNotFoundError, with the Status Kueue's server writes (errors.NewNotFound(visibility.Resource(resource)))."""
    reason, message = await impersonated(e2e, user, path)
    assert (reason, message) == ("NotFound", f'{resource}.{GROUP} "{name}" not found'), (reason, message)


async def expect_forbidden(e2e: E2E, user: str, path: str) -> None:
    """BeForbiddenError: kube-apiserver's RBAC refuses the request before it reaches Kueue's server."""
    reason, message = await impersonated(e2e, user, path)
    assert reason == "Forbidden", (reason, message)
    assert f'User "{user}" cannot get resource' in message, message


async def wait_not_found(e2e: E2E, user: str, path: str, resource: str, name: str) -> None:
    """Kueue's "Wait for ResourceNotFound error instead of Forbidden to make sure the role binding works"."""

    async def answer() -> tuple[str, str]:
        return await impersonated(e2e, user, path)

    await _eventually(
        answer,
        lambda got: got == ("NotFound", f'{resource}.{GROUP} "{name}" not found'),
        what=f"{path} as {user} NotFound",
        timeout=90,
        interval=0.5,
    )


# -- the objects -------------------------------------------------------------------------------------------------------


def _namespaces(step: str) -> tuple[str, str]:
    """nsA and nsB of a step (Kueue: two namespaces from the prefix ``e2e-``)."""
    return f"e2e-vis-{step}-a", f"e2e-vis-{step}-b"


def _job(
    name: str, ns: str, lq: str, priority_class_name: str, *, cpu: str = "1", seconds: float | None
) -> dict[str, Any]:
    """testingjob.MakeJob(name, ns).Queue(lq).RequestAndLimit(cpu).WorkloadPriorityClass(...); ``seconds`` None is
    BehaviorExitFast, FOREVER BehaviorWaitForDeletion."""
    return job(
        name, ns, queue=lq, requests={"cpu": cpu}, seconds=seconds, labels={PRIORITY_CLASS_LABEL: priority_class_name}
    )


async def _capacity_maxed(e2e: E2E, ns_a: str, ns_b: str) -> str:
    """When("There are pending workloads due to capacity maxed by the admitted job")'s BeforeEach: flavor
    ``default-flavor-<nsA>``, a ClusterQueue of 1 CPU, LocalQueues ``a`` and ``b`` in nsA, the priority classes
    high (100), mid (75) and low (50), and the blocking Job ``test-job-1`` (1 CPU, high, until deleted, backoffLimit
    0) admitted. Returns the ClusterQueue's name."""
    rf, cq = f"default-flavor-{ns_a}", f"cluster-queue-{ns_a}"
    await e2e.apply(namespace(ns_a), namespace(ns_b), flavor(rf), cluster_queue(cq, {rf: {"cpu": "1"}}))
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.apply(local_queue("a", ns_a, cq), local_queue("b", ns_a, cq))
    await _lq_active(e2e, ns_a, "a", "b")
    await e2e.apply(
        priority_class(f"high-{ns_a}", HIGH), priority_class(f"mid-{ns_a}", MID), priority_class(f"low-{ns_a}", LOW)
    )
    blocking = _job("test-job-1", ns_a, "a", f"high-{ns_a}", seconds=FOREVER)
    blocking["spec"]["backoffLimit"] = 0
    await e2e.create(blocking)
    await e2e.wait(
        "job", "test-job-1", ns_a, lambda j: j["spec"].get("suspend") is False, what="the blocking Job unsuspended"
    )
    return cq


async def _lq_active(e2e: E2E, ns: str, *names: str) -> None:
    """CreateLocalQueuesAndWaitForActive."""
    for name in names:
        await e2e.wait("localqueue", name, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{name} active")


async def _pending_jobs(e2e: E2E, cases: list[tuple[str, str, str, str]]) -> None:
    """createPendingJobs: (job, priority class, LocalQueue, namespace), each 1 CPU, exiting fast once admitted."""
    await e2e.create(*(_job(name, ns, lq, pc, seconds=None) for name, pc, lq, ns in cases))


async def _release_quota(e2e: E2E, ns: str) -> None:
    """By "Await for pods to be running" (the blocking Job's status.ready is 1), then "Terminate execution of the
    first workload to release the quota": util.DeleteAllPodsInNamespace, which the Job controller counts as a failure
    of the blocking Job (backoffLimit 0), so it fails and its Workload finishes."""
    await e2e.wait(
        "job", "test-job-1", ns, lambda j: (j.get("status") or {}).get("ready") == 1, what="the blocking Job ready"
    )
    await e2e.kubectl.ok("delete", "pods", "--all", "-n", ns)


async def _one_pending_then_admitted(e2e: E2E, ns_a: str, path: str) -> None:
    """The steps shared by Kueue's "Should allow fetching information about pending workloads in ..." cases: zero
    pending, ``test-job-2`` (low priority) pending behind the blocking Job, then admitted once its quota is free."""
    await expect_count(e2e, path, 0)  # Verify there are zero pending workloads
    await e2e.create(_job("test-job-2", ns_a, "a", f"low-{ns_a}", seconds=None))
    await expect_count(e2e, path, 1)  # Verify there is one pending workload
    await _release_quota(e2e, ns_a)
    await expect_count(e2e, path, 0)  # ... after the second workload is admitted

    def admitted(j: dict[str, Any]) -> bool:
        return j["spec"].get("suspend") is False

    await e2e.wait("job", "test-job-2", ns_a, admitted, what="test-job-2 admitted")


async def _bind(e2e: E2E, *, kind: str, name: str, ns: str | None, role: str, account: str) -> None:
    """A RoleBinding (``ns``) or ClusterRoleBinding of ClusterRole ``role`` to ServiceAccount KUEUE_NS/``account``
    (mustCreateBatchUserRoleBinding; the admin case's ClusterRoleBinding)."""
    metadata: dict[str, Any] = {"name": name}
    if ns is not None:
        metadata["namespace"] = ns
    await e2e.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": KUEUE_NS}],
        }
    )


# -- the steps ---------------------------------------------------------------------------------------------------------


async def cluster_queue_pending_v1beta1(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    allow fetching information about pending workloads in ClusterQueue (v1beta1)"."""
    ns_a, ns_b = _namespaces("cq1")
    cq = await _capacity_maxed(e2e, ns_a, ns_b)
    await _one_pending_then_admitted(e2e, ns_a, cq_path(cq, "v1beta1"))


async def cluster_queue_pending(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    allow fetching information about pending workloads in ClusterQueue"."""
    ns_a, ns_b = _namespaces("cq2")
    cq = await _capacity_maxed(e2e, ns_a, ns_b)
    await _one_pending_then_admitted(e2e, ns_a, cq_path(cq))


async def cluster_queue_positions(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    allow fetching information about position of pending workloads in ClusterQueue"."""
    ns_a, ns_b = _namespaces("cqpos")
    cq = await _capacity_maxed(e2e, ns_a, ns_b)
    await _pending_jobs(
        e2e,
        [
            ("lq-a-high-prio", f"high-{ns_a}", "a", ns_a),
            ("lq-b-mid-prio", f"mid-{ns_a}", "b", ns_a),
            ("lq-b-low-prio", f"low-{ns_a}", "b", ns_a),
        ],
    )
    await expect_items(
        e2e,
        cq_path(cq),
        [
            pending(ns_a, "lq-a-high-prio", HIGH, "a", in_lq=0, in_cq=0),
            pending(ns_a, "lq-b-mid-prio", MID, "b", in_lq=0, in_cq=1),
            pending(ns_a, "lq-b-low-prio", LOW, "b", in_lq=1, in_cq=2),
        ],
    )


async def local_queue_pending(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    allow fetching information about pending workloads in LocalQueue"."""
    ns_a, ns_b = _namespaces("lq")
    await _capacity_maxed(e2e, ns_a, ns_b)
    await _one_pending_then_admitted(e2e, ns_a, lq_path(ns_a, "a"))


async def local_queue_positions(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    allow fetching information about position of pending workloads from different LocalQueues"."""
    ns_a, ns_b = _namespaces("lqpos")
    await _capacity_maxed(e2e, ns_a, ns_b)
    await _pending_jobs(
        e2e,
        [
            ("lq-a-high-prio", f"high-{ns_a}", "a", ns_a),
            ("lq-b-mid-prio", f"mid-{ns_a}", "b", ns_a),
            ("lq-b-low-prio", f"low-{ns_a}", "b", ns_a),
        ],
    )
    await expect_items(e2e, lq_path(ns_a, "a"), [pending(ns_a, "lq-a-high-prio", HIGH, "a", in_lq=0, in_cq=0)])
    await expect_items(
        e2e,
        lq_path(ns_a, "b"),
        [
            pending(ns_a, "lq-b-mid-prio", MID, "b", in_lq=0, in_cq=1),
            pending(ns_a, "lq-b-low-prio", LOW, "b", in_lq=1, in_cq=2),
        ],
    )


async def same_local_queue_name_in_two_namespaces(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    fetch information about the position of pending workloads with the same localQueue name in different
    namespaces"."""
    ns_a, ns_b = _namespaces("samelq")
    cq = await _capacity_maxed(e2e, ns_a, ns_b)
    await e2e.apply(local_queue("local-queue", ns_a, cq))
    await _lq_active(e2e, ns_a, "local-queue")
    await e2e.apply(local_queue("local-queue", ns_b, cq))
    await _lq_active(e2e, ns_b, "local-queue")
    # 2 CPU each, more than the ClusterQueue's quota: both stay pending
    await e2e.create(
        _job("job-a", ns_a, "local-queue", f"mid-{ns_a}", cpu="2", seconds=FOREVER),
        _job("job-b", ns_b, "local-queue", f"low-{ns_a}", cpu="2", seconds=FOREVER),
    )
    await expect_items(
        e2e, lq_path(ns_a, "local-queue"), [pending(ns_a, "job-a", MID, "local-queue", in_lq=0, in_cq=0)]
    )
    await expect_items(
        e2e, lq_path(ns_b, "local-queue"), [pending(ns_b, "job-b", LOW, "local-queue", in_lq=0, in_cq=1)]
    )


async def local_queues_in_two_namespaces(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", It "Should
    allow fetching information about position of pending workloads from different LocalQueues from different
    Namespaces"."""
    ns_a, ns_b = _namespaces("lqns")
    cq = await _capacity_maxed(e2e, ns_a, ns_b)
    await e2e.apply(local_queue("b", ns_b, cq))
    await _lq_active(e2e, ns_b, "b")
    await _pending_jobs(
        e2e,
        [
            ("lq-a-high-prio", f"high-{ns_a}", "a", ns_a),
            ("lq-b-mid-prio", f"mid-{ns_a}", "b", ns_b),
            ("lq-b-low-prio", f"low-{ns_a}", "b", ns_b),
        ],
    )
    await expect_items(e2e, lq_path(ns_a, "a"), [pending(ns_a, "lq-a-high-prio", HIGH, "a", in_lq=0, in_cq=0)])
    await expect_items(
        e2e,
        lq_path(ns_b, "b"),
        [
            pending(ns_b, "lq-b-mid-prio", MID, "b", in_lq=0, in_cq=1),
            pending(ns_b, "lq-b-low-prio", LOW, "b", in_lq=1, in_cq=2),
        ],
    )


async def batch_user_sees_own_namespace_only(e2e: E2E) -> None:
    """visibility_test.go, When "There are pending workloads due to capacity maxed by the admitted job", When "A
    subject is bound to kueue-batch-user-role, but not to kueue-batch-admin-role, and reads a LocalQueue sharing a
    ClusterQueue across Namespaces", It "Should only expose pending workloads from the caller's own Namespace"."""
    ns_a, ns_b = _namespaces("rbacown")
    cq = await _capacity_maxed(e2e, ns_a, ns_b)
    await e2e.apply(local_queue("b", ns_b, cq))
    await _lq_active(e2e, ns_b, "b")
    await _pending_jobs(e2e, [("lq-a-low-prio", f"low-{ns_a}", "a", ns_a), ("lq-b-mid-prio", f"mid-{ns_a}", "b", ns_b)])
    account, user = _subject(ns_a)
    await _bind(
        e2e, kind="RoleBinding", name="read-pending-workloads", ns=ns_a, role="kueue-batch-user-role", account=account
    )
    await wait_not_found(e2e, user, lq_path(ns_a, "non-existent"), "localqueue", "non-existent")

    async def own() -> list[dict[str, Any]]:
        reason, body = await impersonated(e2e, user, lq_path(ns_a, "a"))
        assert reason == "OK", (reason, body)
        return _items(json.loads(body)["items"])

    want = [pending(ns_a, "lq-a-low-prio", LOW, "a", in_lq=0, in_cq=1)]
    await _eventually(own, lambda got: got == want, what=f"{ns_a}/a as {user} is {want}", timeout=90, interval=0.5)
    await expect_forbidden(e2e, user, lq_path(ns_b, "b"))  # a LocalQueue in a different Namespace
    await expect_forbidden(e2e, user, cq_path(cq))  # the cluster-scoped ClusterQueue endpoint
    await e2e.kubectl.ok("delete", "rolebinding", "read-pending-workloads", "-n", ns_a)


async def batch_admin_gets_not_found(e2e: E2E) -> None:
    """visibility_test.go, When "A subject is bound to kueue-batch-admin-role", It "Should return an appropriate
    error"."""
    ns_a, _ = _namespaces("rbacadmin")
    await e2e.apply(namespace(ns_a))
    account, user = _subject(ns_a)
    binding = f"read-pending-workloads-{ns_a}"
    await _bind(e2e, kind="ClusterRoleBinding", name=binding, ns=None, role="kueue-batch-admin-role", account=account)
    await wait_not_found(e2e, user, cq_path("non-existent"), "clusterqueue", "non-existent")
    await expect_not_found(e2e, user, cq_path("non-existent"), "clusterqueue", "non-existent")
    await expect_not_found(e2e, user, lq_path(ns_a, "non-existent"), "localqueue", "non-existent")
    await e2e.kubectl.ok("delete", "clusterrolebinding", binding)


async def batch_user_forbidden_elsewhere(e2e: E2E) -> None:
    """visibility_test.go, When "A subject is bound to kueue-batch-user-role, but not to kueue-batch-admin-role", It
    "Should return an appropriate error"."""
    ns_a, _ = _namespaces("rbacuser")
    await e2e.apply(namespace(ns_a))
    account, user = _subject(ns_a)
    await _bind(
        e2e, kind="RoleBinding", name="read-pending-workloads", ns=ns_a, role="kueue-batch-user-role", account=account
    )
    await wait_not_found(e2e, user, lq_path(ns_a, "non-existent"), "localqueue", "non-existent")
    await expect_forbidden(e2e, user, cq_path("non-existent"))
    await expect_not_found(e2e, user, lq_path(ns_a, "non-existent"), "localqueue", "non-existent")
    await expect_forbidden(e2e, user, lq_path("default", "non-existent"))  # a LocalQueue in another namespace
    await e2e.kubectl.ok("delete", "rolebinding", "read-pending-workloads", "-n", ns_a)


async def unbound_subject_forbidden(e2e: E2E) -> None:
    """visibility_test.go, When "A subject is not bound to kueue-batch-user-role, nor to kueue-batch-admin-role", It
    "Should return an appropriate error"."""
    ns_a, _ = _namespaces("rbacnone")
    await e2e.apply(namespace(ns_a))
    _, user = _subject(ns_a)
    await expect_forbidden(e2e, user, cq_path("non-existent"))
    await expect_forbidden(e2e, user, lq_path(ns_a, "non-existent"))


STEPS: list[Step] = [
    cluster_queue_pending_v1beta1,
    cluster_queue_pending,
    cluster_queue_positions,
    local_queue_pending,
    local_queue_positions,
    same_local_queue_name_in_two_namespaces,
    local_queues_in_two_namespaces,
    batch_user_sees_own_namespace_only,
    batch_admin_gets_not_found,
    batch_user_forbidden_elsewhere,
    unbound_subject_forbidden,
]
