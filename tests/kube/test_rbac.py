"""RBAC in the emulated API server (kueue_es/sim/rbac.py) and Kueue's user-facing ClusterRoles
(kueue_es/user_roles.py), through the real kubectl as Kueue's "Setup RBAC" page has users work:
a RoleBinding of ``kueue-batch-user-role`` in a namespace, then ``kubectl --as``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import multidict
import pytest
import yaml

from kueue_es import user_roles
from kueue_es.sim import emulator, rbac
from tests.kube.test_kubectl import Kubectl

pytestmark = pytest.mark.timeout(60)
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: runs the real one")


# -- the pure parts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/team-a/pods", {}, ("list", "", "pods", "", "team-a", "")),
        ("GET", "/api/v1/namespaces/team-a/pods/p", {}, ("get", "", "pods", "", "team-a", "p")),
        ("GET", "/api/v1/namespaces/team-a/pods", {"watch": "true"}, ("watch", "", "pods", "", "team-a", "")),
        ("DELETE", "/apis/batch/v1/namespaces/a/jobs", {}, ("deletecollection", "batch", "jobs", "", "a", "")),
        ("PUT", "/apis/batch/v1/namespaces/a/jobs/j/status", {}, ("update", "batch", "jobs", "status", "a", "j")),
        ("GET", "/api/v1/namespaces/team-a", {}, ("get", "", "namespaces", "", "team-a", "team-a")),
        ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", "", "", "")),
        (
            "GET",
            "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads",
            {},
            ("get", "visibility.kueue.x-k8s.io", "clusterqueues", "pendingworkloads", "", "cq"),
        ),
    ],
)
def test_request_attributes_are_read_as_kube_apiservers(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    attrs = rbac.request_attributes(method, path, query)
    assert attrs.resource_request
    assert (attrs.verb, attrs.group, attrs.resource, attrs.subresource, attrs.namespace, attrs.name) == expected


def test_paths_outside_the_api_are_non_resource_requests() -> None:
    attrs = rbac.request_attributes("GET", "/openapi/v3/apis/batch/v1", {})
    assert (attrs.resource_request, attrs.verb, attrs.path) == (False, "get", "/openapi/v3/apis/batch/v1")
    discovery = {"nonResourceURLs": ["/openapi/*", "/api"], "verbs": ["get"]}
    assert rbac.rule_allows(discovery, attrs)
    assert rbac.rule_allows(discovery, rbac.request_attributes("GET", "/api", {}))
    assert not rbac.rule_allows(discovery, rbac.request_attributes("GET", "/apis", {}))


def test_a_rule_matches_verbs_groups_resources_subresources_and_names() -> None:
    get_status = rbac.Attributes(
        verb="get", resource_request=True, group="batch", resource="jobs", subresource="status"
    )
    assert rbac.rule_allows({"verbs": ["get"], "apiGroups": ["batch"], "resources": ["jobs/status"]}, get_status)
    assert not rbac.rule_allows({"verbs": ["get"], "apiGroups": ["batch"], "resources": ["jobs"]}, get_status)
    assert rbac.rule_allows({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, get_status)
    assert rbac.rule_allows({"verbs": ["get"], "apiGroups": ["batch"], "resources": ["*/status"]}, get_status)
    named = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"]}
    assert rbac.rule_allows(named, rbac.Attributes(verb="get", resource_request=True, resource="pods", name="a"))
    assert not rbac.rule_allows(named, rbac.Attributes(verb="get", resource_request=True, resource="pods", name="b"))
    assert not rbac.rule_allows(named, rbac.Attributes(verb="list", resource_request=True, resource="pods"))


def test_kueues_batch_roles_aggregate_the_labelled_editor_and_viewer_roles() -> None:
    roles = user_roles.cluster_roles()
    by_name = {r["metadata"]["name"]: r for r in roles}
    user = rbac.aggregated_rules(by_name["kueue-batch-user-role"], roles)
    admin = rbac.aggregated_rules(by_name["kueue-batch-admin-role"], roles)
    create_job = rbac.Attributes(verb="create", resource_request=True, group="batch", resource="jobs", namespace="a")
    list_lq = rbac.Attributes(
        verb="list", resource_request=True, group="kueue.x-k8s.io", resource="localqueues", namespace="a"
    )
    create_cq = rbac.Attributes(verb="create", resource_request=True, group="kueue.x-k8s.io", resource="clusterqueues")
    pending_lq = rbac.Attributes(
        verb="get",
        resource_request=True,
        group="visibility.kueue.x-k8s.io",
        resource="localqueues",
        subresource="pendingworkloads",
        namespace="a",
        name="q",
    )
    for attrs in (create_job, list_lq, pending_lq):
        assert any(rbac.rule_allows(r, attrs) for r in user), attrs
    assert not any(rbac.rule_allows(r, create_cq) for r in user)
    assert any(rbac.rule_allows(r, create_cq) for r in admin)
    # Kueue's role names and labels (config/components/rbac, kustomize prefix kueue-)
    viewer = by_name["kueue-workload-viewer-role"]["metadata"]["labels"]
    assert viewer[user_roles.ROLE_LABEL] == "workload-viewer"
    assert viewer["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert user_roles.BATCH_USER not in by_name["kueue-clusterqueue-viewer-role"]["metadata"]["labels"]


def test_the_forbidden_message_is_kube_apiservers() -> None:
    alice = rbac.User("alice", (rbac.AUTHENTICATED,))
    message, details = rbac.forbidden(alice, rbac.request_attributes("GET", "/apis/batch/v1/namespaces/a/jobs", {}))
    assert message == (
        'jobs.batch is forbidden: User "alice" cannot list resource "jobs" in API group "batch" in the namespace "a"'
    )
    assert details == {"group": "batch", "kind": "jobs"}
    message, _ = rbac.forbidden(alice, rbac.request_attributes("GET", "/api/v1/nodes/n1", {}))
    assert (
        message
        == 'nodes "n1" is forbidden: User "alice" cannot get resource "nodes" in API group "" at the cluster scope'
    )
    message, _ = rbac.forbidden(alice, rbac.request_attributes("GET", "/metrics", {}))
    assert message == 'forbidden: User "alice" cannot get path "/metrics"'


def test_the_deploy_file_is_the_generated_one() -> None:
    """deploy/base/user-roles.yaml is what ``kueue-es deploy roles`` prints (regenerate with ``--write``)."""
    assert user_roles.FILE.read_text() == user_roles.render()
    kustomization = yaml.safe_load((user_roles.FILE.parent / "kustomization.yaml").read_text())
    assert user_roles.FILE.name in kustomization["resources"]


# -- through kubectl --------------------------------------------------------------------------------------


@pytest.fixture
async def kueue_cluster() -> Any:
    async with emulator.serve_emulator() as served:
        served.put_objects(user_roles.cluster_roles())
        yield served


def _job(namespace: str) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sample", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                    }
                }
            },
        }
    )


async def _can_i(kubectl: Kubectl, *args: str) -> str:
    """``kubectl auth can-i``'s answer (it exits 1 for no)."""
    _, out, _ = await kubectl.run("auth", "can-i", *args)
    return out.strip()


def _binding(namespace: str, subject_kind: str, subject: str, role: str) -> str:
    return json.dumps(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "batch-users", "namespace": namespace},
            "subjects": [{"kind": subject_kind, "name": subject, "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": role, "apiGroup": "rbac.authorization.k8s.io"},
        }
    )


@needs_kubectl
async def test_a_batch_user_bound_in_a_namespace_works_there_only(kueue_cluster: Any, tmp_path: Path) -> None:
    """Kueue's "Giving permissions to a batch user": a RoleBinding of kueue-batch-user-role to a group in
    team-a lets its users create Jobs and read LocalQueues and Workloads there, and nothing elsewhere."""
    kubectl = Kubectl(kueue_cluster.url, tmp_path)
    await kubectl.ok("create", "namespace", "team-a")
    await kubectl.ok("create", "namespace", "team-b")
    as_alice = ("--as", "alice", "--as-group", "team-a@example.com")

    code, _, err = await kubectl.run("get", "jobs", "-n", "team-a", *as_alice)
    assert code != 0
    assert (
        'jobs.batch is forbidden: User "alice" cannot list resource "jobs" in API group "batch" in the namespace '
        '"team-a"' in err
    ), err
    assert await _can_i(kubectl, "create", "jobs", "-n", "team-a", *as_alice) == "no"

    await kubectl.ok(
        "apply", "-f", "-", stdin=_binding("team-a", "Group", "team-a@example.com", "kueue-batch-user-role")
    )
    await kubectl.ok("create", "-f", "-", *as_alice, stdin=_job("team-a"))
    assert "sample" in await kubectl.ok("get", "jobs", "-n", "team-a", *as_alice)
    await kubectl.ok("get", "localqueues,workloads", "-n", "team-a", *as_alice)
    assert await _can_i(kubectl, "create", "jobs", "-n", "team-a", *as_alice) == "yes"
    assert await _can_i(kubectl, "create", "jobs", "-n", "team-b", *as_alice) == "no"
    assert await _can_i(kubectl, "create", "localqueues", "-n", "team-a", *as_alice) == "no"

    code, _, err = await kubectl.run("create", "-f", "-", *as_alice, stdin=_job("team-b"))
    assert code != 0 and 'cannot create resource "jobs" in API group "batch" in the namespace "team-b"' in err, err
    code, _, err = await kubectl.run("get", "clusterqueues", *as_alice)
    assert (
        code != 0 and 'cannot list resource "clusterqueues" in API group "kueue.x-k8s.io" at the cluster scope' in err
    )
    code, _, err = await kubectl.run(
        "get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads", *as_alice
    )
    assert code != 0 and "forbidden" in err, err
    # a user in no bound group is still refused in team-a
    code, _, err = await kubectl.run("get", "jobs", "-n", "team-a", "--as", "bob")
    assert code != 0 and 'User "bob" cannot list' in err, err
    assert "alice" in await kubectl.ok("auth", "whoami", *as_alice)


@needs_kubectl
async def test_a_batch_admin_manages_kueues_objects_and_the_roles_show_their_aggregated_rules(
    kueue_cluster: Any, tmp_path: Path
) -> None:
    """Kueue's "Giving permissions to a batch administrator": a ClusterRoleBinding of kueue-batch-admin-role;
    the aggregated roles carry the rules the control plane gathers (kubectl get clusterrole -o yaml), and a
    role of the user's own aggregating Kueue's viewers by ``rbac.kueue.x-k8s.io/role`` works too."""
    kubectl = Kubectl(kueue_cluster.url, tmp_path)
    admin_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "batch-admins"},
        "subjects": [{"kind": "User", "name": "admin@example.com", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": "kueue-batch-admin-role", "apiGroup": "rbac.authorization.k8s.io"},
    }
    await kubectl.ok("apply", "-f", "-", stdin=json.dumps(admin_binding))
    as_admin = ("--as", "admin@example.com")
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    await kubectl.ok("apply", "-f", "-", *as_admin, stdin=json.dumps(flavor))
    assert "default" in await kubectl.ok("get", "resourceflavors", *as_admin)
    code, _, err = await kubectl.run("get", "nodes", *as_admin)
    assert code != 0 and 'cannot list resource "nodes"' in err, err

    stored = json.loads(await kubectl.ok("get", "clusterrole", "kueue-batch-user-role", "-o", "json"))
    assert {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": list(user_roles.EDIT_VERBS)} in stored["rules"]
    assert "kueue-workload-viewer-role" in await kubectl.ok(
        "get", "clusterroles", "-l", f"{user_roles.ROLE_LABEL}=workload-viewer"
    )

    readonly = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kueue-queue-readonly"},
        "aggregationRule": {
            "clusterRoleSelectors": [
                {
                    "matchExpressions": [
                        {
                            "key": user_roles.ROLE_LABEL,
                            "operator": "In",
                            "values": ["clusterqueue-viewer", "localqueue-viewer", "workload-viewer"],
                        }
                    ]
                }
            ]
        },
        "rules": [],
    }
    await kubectl.ok("apply", "-f", "-", stdin=json.dumps(readonly))
    binding = {
        **admin_binding,
        "metadata": {"name": "readers"},
        "subjects": [{"kind": "User", "name": "carol", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": "kueue-queue-readonly", "apiGroup": "rbac.authorization.k8s.io"},
    }
    await kubectl.ok("apply", "-f", "-", stdin=json.dumps(binding))
    await kubectl.ok("get", "clusterqueues", "--as", "carol")
    await kubectl.ok("get", "workloads", "-A", "--as", "carol")
    code, _, err = await kubectl.run("delete", "clusterqueue", "any", "--as", "carol")
    assert code != 0 and 'cannot delete resource "clusterqueues"' in err, err


@pytest.mark.parametrize(
    ("user", "groups", "expected"),
    [
        ("alice", [], ("system:authenticated",)),
        ("alice", ["team-a"], ("team-a", "system:authenticated")),
        (
            "system:serviceaccount:kueue-system:default",
            [],
            ("system:serviceaccounts", "system:serviceaccounts:kueue-system", "system:authenticated"),
        ),
        # groups given: a service account is in those only (impersonation.go: "if !groupsSpecified")
        ("system:serviceaccount:kueue-system:default", ["team-a"], ("team-a", "system:authenticated")),
        ("system:serviceaccount:kueue-system", [], ("system:authenticated",)),  # not a service account's name
        ("bob", ["system:unauthenticated"], ("system:unauthenticated",)),
        ("system:anonymous", [], ("system:unauthenticated",)),
    ],
)
def test_an_impersonated_user_gets_kube_apiservers_groups(user: str, groups: list[str], expected: tuple[str]) -> None:
    headers = multidict.CIMultiDict([("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups)])
    assert rbac.impersonated(headers) == rbac.User(user, expected)


@needs_kubectl
async def test_kubectls_create_role_and_binding_commands_bind_kueues_roles(kueue_cluster: Any, tmp_path: Path) -> None:
    """The bindings of Kueue's "Setup RBAC" typed with kubectl's generators rather than applied from a manifest:
    ``kubectl create rolebinding|clusterrolebinding|role|clusterrole`` send protobuf bodies, which the emulator
    refused before (415: "reads protobuf bodies only for ..."), so ``kubectl create rolebinding alice-user
    --clusterrole=kueue-batch-user-role --user=alice`` failed where a cluster stores the binding."""
    kubectl = Kubectl(kueue_cluster.url, tmp_path)
    assert await _can_i(kubectl, "create", "jobs", "-n", "default", "--as", "alice") == "no"
    out = await kubectl.ok(
        "create", "rolebinding", "alice-user", "--clusterrole=kueue-batch-user-role", "--user=alice", "-n", "default"
    )
    assert out.strip() == "rolebinding.rbac.authorization.k8s.io/alice-user created"
    stored = json.loads(await kubectl.ok("get", "rolebinding", "alice-user", "-n", "default", "-o", "json"))
    assert stored["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
    assert stored["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "kueue-batch-user-role",
    }
    assert await _can_i(kubectl, "create", "jobs", "-n", "default", "--as", "alice") == "yes"
    assert await _can_i(kubectl, "create", "jobs", "-n", "team-b", "--as", "alice") == "no"

    await kubectl.ok("create", "clusterrolebinding", "admins", "--clusterrole=kueue-batch-admin-role", "--group=ops")
    assert await _can_i(kubectl, "create", "clusterqueues", "--as", "bob", "--as-group", "ops") == "yes"

    await kubectl.ok("create", "role", "lq-reader", "--verb=get,list", "--resource=localqueues.kueue.x-k8s.io")
    role = json.loads(await kubectl.ok("get", "role", "lq-reader", "-o", "json"))
    assert role["rules"] == [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get", "list"]}]
    await kubectl.ok(
        "create", "clusterrole", "kueue-viewers", f"--aggregation-rule={user_roles.ROLE_LABEL}=workload-viewer"
    )
    aggregated = json.loads(await kubectl.ok("get", "clusterrole", "kueue-viewers", "-o", "json"))
    assert aggregated["aggregationRule"] == {
        "clusterRoleSelectors": [{"matchLabels": {user_roles.ROLE_LABEL: "workload-viewer"}}]
    }
