"""deploy/: every manifest is valid Kubernetes, and says what the design says.

kubernetes-validate checks each document (strict: unknown fields are errors)
against Kubernetes 1.36, the first release serving the MutatingAdmissionPolicy
API at v1, and the latest it knows; ``kubectl kustomize`` (where kubectl is
installed) builds the base and its output is checked the same way. The rest reads
the manifests: least-privilege RBAC per service (the watcher's kinds are the ones
services/watcher watches), two replicas and a locked-down pod for each service,
a 3-node NATS with one user per service, default-deny NetworkPolicies, and the
MutatingAdmissionPolicy that creates queue-labelled Jobs suspended.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kueue_es import crds
from kueue_es.services.kube import resources
from tests.deploy.manifests import DEPLOY, Document, all_documents, find

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = pytest.mark.slow

DOCUMENTS = all_documents()
VERSIONS = ("1.36", kubernetes_validate.latest_version())
SERVICES = ("watcher", "admitter", "preemptor", "tas-placer", "multikueue", "dispatcher")
DECIDERS = ("admitter", "preemptor", "tas-placer", "multikueue")
NATS_USERS = ("admin", *SERVICES, "multikueue-edge", "reader", "compactor", "publisher")


def kinds(kind: str) -> list[dict[str, Any]]:
    return [d.obj for d in DOCUMENTS if d.obj.get("kind") == kind]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


# -- validity ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: d.label)
def test_manifest_is_valid_kubernetes(doc: Document, version: str) -> None:
    kubernetes_validate.validate(doc.obj, version, strict=True)


def test_every_manifest_is_in_the_base() -> None:
    """Every manifest file is reached from deploy/base/kustomization.yaml, and everything it names exists."""
    reached: set[Path] = set()

    def walk(directory: Path) -> None:
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        for entry in kustomization.get("resources", []):
            target = (directory / entry).resolve()
            assert target.exists(), f"{directory}/kustomization.yaml names {entry}, which does not exist"
            if target.is_dir():
                walk(target)
            else:
                reached.add(target)
        for generator in kustomization.get("configMapGenerator", []):
            for name in generator.get("files", []):
                assert (directory / name).is_file()

    walk(DEPLOY / "base")
    assert {p.resolve() for p in {d.path for d in DOCUMENTS}} == reached


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_build_is_valid() -> None:
    built = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / "base")], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    docs = [d for d in yaml.safe_load_all(built) if d]
    for doc in docs:
        kubernetes_validate.validate(doc, VERSIONS[0], strict=True)
    config_maps = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("kueue-es-nats-config")
    ]
    assert len(config_maps) == 1 and set(config_maps[0]["data"]) == {"nats.conf", "nats-accounts.conf"}
    (nats,) = [d for d in docs if d["kind"] == "StatefulSet"]
    assert pod_spec(nats)["volumes"][0]["configMap"]["name"] == config_maps[0]["metadata"]["name"]
    namespaced = [d for d in docs if d["kind"] not in CLUSTER_SCOPED]
    # every aggregated API server reads kube-system's extension-apiserver-authentication: its RoleBinding is there
    outside = [(d["kind"], d["metadata"]["name"]) for d in namespaced if d["metadata"].get("namespace") != "kueue-es"]
    assert outside == [("RoleBinding", "kueue-es-visibility-auth-reader")]
    assert next(d for d in namespaced if d["kind"] == "RoleBinding")["metadata"]["namespace"] == "kube-system"
    assert all("namespace" not in d["metadata"] for d in docs if d["kind"] in CLUSTER_SCOPED)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_without_crds_is_the_base_less_its_crds() -> None:
    def build(directory: str) -> list[tuple[str, str]]:
        text = subprocess.run(
            ["kubectl", "kustomize", str(DEPLOY / directory)], capture_output=True, text=True, check=True, timeout=120
        ).stdout
        return sorted((d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(text) if d)

    base = build("base")
    assert build("without-crds") == [item for item in base if item[0] != "CustomResourceDefinition"]
    assert len(base) - len(build("without-crds")) == len(crds.KINDS)


CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}


def test_namespaced_objects_name_their_namespace() -> None:
    for doc in DOCUMENTS:
        if doc.obj["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc.obj["metadata"], doc.label
        else:
            # the one exception: the RoleBinding an aggregated API server needs in kube-system
            expected = "kube-system" if doc.obj["metadata"]["name"] == "kueue-es-visibility-auth-reader" else "kueue-es"
            assert doc.obj["metadata"].get("namespace") == expected, doc.label


# -- RBAC ---------------------------------------------------------------------------------------------


def rules_of(service: str) -> list[dict[str, Any]]:
    return find("ClusterRole", f"kueue-es-{service}")["rules"]


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_watcher_is_read_only_and_covers_what_it_watches() -> None:
    from kueue_es.services.watcher import kinds as watcher

    granted = grants(rules_of("watcher"))
    assert {verb for _, _, verb in granted} == {"list", "watch"}
    for kind in watcher.WATCHED_KINDS:
        refs = [ref for (_, k), ref in resources.RESOURCES.items() if k == kind]
        refs += [v for v in vars(watcher).values() if isinstance(v, resources.ResourceRef) and v.kind == kind]
        refs += [ref for k, ref in watcher.INPUT_REFS.items() if k == kind]
        if kind in watcher.API_VERSIONS:
            refs.append(resources.ref_for(watcher.API_VERSIONS[kind], kind))
        assert refs, f"no resource known for {kind}"
        assert any({(ref.group, ref.plural, "list"), (ref.group, ref.plural, "watch")} <= granted for ref in refs), kind


def test_dispatcher_has_only_the_verbs_it_uses() -> None:
    from kueue_es.jobframework import integrations

    suspended = [i for i in integrations.registry().values() if i.suspend_path is not None]
    assert grants(rules_of("dispatcher")) == {
        # start and stop the jobs; delete: one Kueue deactivated, once objectRetentionPolicies says so
        *((i.group, i.plural, verb) for i in suspended for verb in ("get", "patch", "delete")),
        ("batch", "jobs", "get"),
        ("batch", "jobs", "patch"),
        ("batch", "jobs", "delete"),
        ("", "pods", "get"),  # plain Pods to start
        ("", "pods", "list"),
        ("", "pods", "watch"),  # the TAS ungater
        ("", "pods", "patch"),
        ("", "pods", "delete"),  # Kueue's Pod.Stop, excess pods of a group, a deactivated Pod's retention
        ("", "events", "create"),  # the Events Kueue records on Workloads
        ("apps", "statefulsets", "list"),  # a StatefulSet's rollout: its current-revision pods are ungated
        ("apps", "statefulsets", "watch"),
        ("kueue.x-k8s.io", "workloads", "get"),  # the check controllers' entries, kept by a status write
        ("kueue.x-k8s.io", "workloads", "list"),
        ("kueue.x-k8s.io", "workloads", "watch"),  # the ConcurrentAdmission controller's watches, and these two
        ("kueue.x-k8s.io", "clusterqueues", "watch"),
        ("kueue.x-k8s.io", "localqueues", "watch"),
        ("kueue.x-k8s.io", "workloads", "create"),  # server-side apply of a new Workload is checked as create
        ("kueue.x-k8s.io", "workloads", "patch"),
        ("kueue.x-k8s.io", "workloads", "delete"),  # the Workload of a Job that is gone
        ("kueue.x-k8s.io", "workloads/status", "patch"),
        ("kueue.x-k8s.io", "clusterqueues", "list"),
        ("kueue.x-k8s.io", "clusterqueues", "get"),  # Kueue's resource-in-use finalizer, kept and taken off
        ("kueue.x-k8s.io", "clusterqueues", "patch"),
        ("kueue.x-k8s.io", "localqueues", "list"),
        ("kueue.x-k8s.io", "cohorts", "list"),
        ("kueue.x-k8s.io", "clusterqueues/status", "patch"),
        ("kueue.x-k8s.io", "localqueues/status", "patch"),
        ("kueue.x-k8s.io", "cohorts/status", "patch"),  # the Active condition (a cycle), fairSharing
        ("kueue.x-k8s.io", "resourceflavors", "get"),  # Kueue's resource-in-use finalizer on these three
        ("kueue.x-k8s.io", "resourceflavors", "patch"),
        ("kueue.x-k8s.io", "admissionchecks", "get"),
        ("kueue.x-k8s.io", "admissionchecks", "patch"),
        ("kueue.x-k8s.io", "topologies", "get"),
        ("kueue.x-k8s.io", "topologies", "patch"),
        ("kueue.x-k8s.io", "admissionchecks/status", "patch"),  # MultiKueue's checks: Active condition
        ("kueue.x-k8s.io", "multikueueclusters/status", "patch"),  # a worker's Active condition
    }


def test_multikueue_edge_has_only_the_verbs_it_uses_on_the_manager() -> None:
    """The edge reads the MultiKueueClusters (and writes their Active condition), the Workloads and jobs it
    copies (a pod group's Pods listed), mirrors job status, and reads the kubeconfig Secrets (a Role in
    kueue-es's namespace)."""
    assert grants(rules_of("multikueue-edge")) == {
        ("kueue.x-k8s.io", "multikueueclusters", "get"),
        ("kueue.x-k8s.io", "multikueueclusters", "list"),
        ("kueue.x-k8s.io", "multikueueclusters", "watch"),
        ("kueue.x-k8s.io", "multikueueclusters/status", "patch"),
        ("kueue.x-k8s.io", "workloads", "get"),
        ("batch", "jobs", "get"),
        ("batch", "jobs/status", "patch"),
        ("jobset.x-k8s.io", "jobsets", "get"),
        ("jobset.x-k8s.io", "jobsets/status", "patch"),
        ("", "pods", "get"),
        ("", "pods", "list"),
        ("", "pods/status", "patch"),
    }
    role = find("Role", "kueue-es-multikueue-edge")
    assert grants(role["rules"]) == {("", "secrets", "get")}
    deployment = find("Deployment", "kueue-es-multikueue-edge")
    (container,) = pod_spec(deployment)["containers"]
    assert container["args"][:2] == ["service", "multikueue-edge"] and "--kubeconfig" in container["args"]
    assert_nats_credentials(deployment, user="multikueue-edge")


#: The verbs each client call of services/kube/client.py needs.
CALL_VERBS = {
    "get_object": {"get"},
    "list_objects": {"list"},
    "watch_objects": {"list", "watch"},
    "patch_object": {"patch"},
    "apply_object": {"patch", "create"},
    "create_object": {"create"},
    "replace_object": {"update"},
    "delete_object": {"delete"},
}


@pytest.mark.parametrize("service", ["watcher", "dispatcher", "provisioning"])
def test_roles_grant_the_verbs_the_code_uses(service: str) -> None:
    """The verbs of each service's ClusterRole are those of the Kubernetes calls in its code, no more, no less."""
    package = DEPLOY.parent / "services" / service.replace("-", "_")
    calls = {name for path in package.glob("*.py") for name in re.findall(r"kube\.(\w+_objects?)\(", path.read_text())}
    used = set().union(*(CALL_VERBS[call] for call in calls))
    assert {verb for _, _, verb in grants(rules_of(service))} == used


#: What the webhook may update, each by name only: its certificates' Secret and its two configurations (the CA
#: bundle), as Kueue's cert rotation (pkg/util/cert rbac markers).
WEBHOOK_OWN = {
    "secrets": ["kueue-es-webhook-server-cert"],
    "mutatingwebhookconfigurations": ["kueue-es-mutating-webhook-configuration"],
    "validatingwebhookconfigurations": ["kueue-es-validating-webhook-configuration"],
    # the CRDs whose v1beta1 conversion webhook it serves (their caBundle), as Kueue's cert rotation
    "customresourcedefinitions": [
        "clusterqueues.kueue.x-k8s.io",
        "cohorts.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
        "multikueueclusters.kueue.x-k8s.io",
    ],
}


def test_no_wildcards_secrets_or_escalation() -> None:
    from kueue_es.jobframework import integrations

    for role in [*kinds("ClusterRole"), *kinds("Role")]:
        name = role["metadata"]["name"]
        if name.startswith("kueue-") and not name.startswith("kueue-es-"):
            continue  # Kueue's ClusterRoles for people (user-roles.yaml): an admin binds them, no service has them
        for rule in role["rules"]:
            if name == "kueue-es-multikueue-edge" and role["kind"] == "Role" and rule["resources"] == ["secrets"]:
                # the workers' kubeconfigs: get only, in kueue-es's namespace (Kueue's multikueue rbac marker)
                assert rule["verbs"] == ["get"] and role["metadata"]["namespace"] == "kueue-es"
                continue
            if name == "kueue-es-webhook" and rule["resources"][0] in WEBHOOK_OWN:
                # the webhook's own objects: get and update, by name, nothing else
                assert rule["resourceNames"] == WEBHOOK_OWN[rule["resources"][0]] and len(rule["resources"]) == 1
                assert rule["verbs"] == ["get", "update"]
                continue
            for group, resource, verb in grants([rule]):
                assert "*" not in (group, resource, verb), name
                assert resource not in ("secrets", "serviceaccounts/token", "roles", "clusterroles"), name
                assert verb not in ("escalate", "bind", "impersonate", "deletecollection")
                assert verb != "update" or resource == "leases", name  # renewing a Lease
                # the Workload of a Job that is gone; the ProvisioningRequests (and their PodTemplates) of
                # finished or evicted workloads; the dispatcher's: pods it stops (Kueue's Pod.Stop) and the jobs
                # the retention policies let go of (objectRetentionPolicies)
                jobs = {"jobs", "pods"} | {i.plural for i in integrations.registry().values()}
                deletable = {"workloads", "provisioningrequests", "podtemplates"}
                assert (
                    verb != "delete" or resource in deletable or (name == "kueue-es-dispatcher" and resource in jobs)
                ), name


def test_only_watcher_and_dispatcher_are_bound_and_deciders_have_no_token() -> None:
    bound = {s["name"] for b in [*kinds("ClusterRoleBinding"), *kinds("RoleBinding")] for s in b["subjects"]}
    assert bound == {
        "kueue-es-watcher",
        "kueue-es-dispatcher",
        "kueue-es-visibility",
        "kueue-es-webhook",
        "kueue-es-provisioning",
        "kueue-es-multikueue-edge",
    }
    for binding in kinds("ClusterRoleBinding"):
        if binding["subjects"][0]["name"] == "kueue-es-visibility":
            continue  # the built-in roles of an aggregated API server: below
        assert binding["roleRef"]["name"] == binding["subjects"][0]["name"]
    for account in kinds("ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
    for service in SERVICES:
        spec = pod_spec(find("Deployment", f"kueue-es-{service}"))
        assert spec["serviceAccountName"] == f"kueue-es-{service}"
        assert spec["automountServiceAccountToken"] is (service in ("watcher", "dispatcher"))
    assert pod_spec(find("StatefulSet", "kueue-es-nats"))["automountServiceAccountToken"] is False


# -- workloads ----------------------------------------------------------------------------------------


def containers() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    out = []
    for workload in [*kinds("Deployment"), *kinds("StatefulSet")]:
        spec = pod_spec(workload)
        out += [(workload["metadata"]["name"], spec, c) for c in spec["containers"]]
    return out


@pytest.mark.parametrize("service", SERVICES)
def test_service_deployment(service: str) -> None:
    deployment = find("Deployment", f"kueue-es-{service}")
    assert deployment["spec"]["replicas"] == 2
    (container,) = pod_spec(deployment)["containers"]
    args = container["args"]
    assert args[:2] == ["service", service]
    nats_url = args[args.index("--nats") + 1]
    assert nats_url == "tls://kueue-es-nats.kueue-es.svc:4222"
    assert not any("$(" in arg for arg in args)  # no secret expanded into argv
    env = {e["name"]: e for e in container["env"]}
    assert_nats_credentials(deployment, user=service)
    assert env["KUEUE_ES_STREAM_REPLICAS"]["value"] == str(find("StatefulSet", "kueue-es-nats")["spec"]["replicas"])
    assert ("--kubeconfig" in args) is (service in ("watcher", "dispatcher"))
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue-es.dev/nats-client"] == "true"
    assert (labels.get("kueue-es.dev/kube-api-client") == "true") is (service in ("watcher", "dispatcher"))
    assert find("PodDisruptionBudget", f"kueue-es-{service}")["spec"]["maxUnavailable"] == 1


def assert_nats_credentials(workload: dict[str, Any], *, user: str) -> None:
    """The pod connects as ``user``: its password and the CA as files of a projected volume, named in the
    environment (``kueue_es.events.bus.nats.connect``), and no secret in any variable."""
    (container,) = pod_spec(workload)["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert not any("secretKeyRef" in e.get("valueFrom", {}) for e in env.values())
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert env["KUEUE_ES_NATS_USER"]["value"] == user
    assert env["KUEUE_ES_NATS_PASSWORD_FILE"]["value"] == f"{mounts['nats']}/password"
    assert env["KUEUE_ES_NATS_CA_FILE"]["value"] == f"{mounts['nats']}/ca.crt"
    (volume,) = [v for v in pod_spec(workload)["volumes"] if v["name"] == "nats"]
    assert volume["projected"]["defaultMode"] == 0o440
    assert [source["secret"] for source in volume["projected"]["sources"]] == [
        {"name": "kueue-es-nats-users", "items": [{"key": user, "path": "password"}]},
        {"name": "kueue-es-nats-tls", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
    ]


def test_the_stream_is_created_by_admin_in_a_job() -> None:
    """The services may only check that KQ_LOG exists; the Job kueue-es-nats-setup creates it as admin."""
    from kueue_es.cli import _parser

    job = find("Job", "kueue-es-nats-setup")
    (container,) = pod_spec(job)["containers"]
    args = _parser().parse_args(container["args"])
    assert args.command == "nats-setup" and args.nats == "tls://kueue-es-nats.kueue-es.svc:4222"
    assert_nats_credentials(job, user="admin")
    env = {e["name"]: e for e in container["env"]}
    assert env["KUEUE_ES_STREAM_REPLICAS"]["value"] == str(find("StatefulSet", "kueue-es-nats")["spec"]["replicas"])
    assert job["spec"]["template"]["metadata"]["labels"]["kueue-es.dev/nats-client"] == "true"
    assert pod_spec(job)["automountServiceAccountToken"] is False
    pod, own = pod_spec(job)["securityContext"], container["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["seccompProfile"]["type"] == "RuntimeDefault"
    assert own["readOnlyRootFilesystem"] is True and own["capabilities"]["drop"] == ["ALL"]


def test_leases_are_the_only_namespaced_grant_and_only_what_the_election_does() -> None:
    """get/update on the watcher's Lease by name, create on leases (not restrictable by name), in the namespace
    of the services, for the watcher only (services/leader.py; the dispatcher's lease is on NATS). The other
    Roles are the webhook's, on its own Secret only, and the MultiKueue edge's, reading the workers' kubeconfig
    Secrets (test_no_wildcards_secrets_or_escalation)."""
    (role,) = [
        r for r in kinds("Role") if r["metadata"]["name"] not in ("kueue-es-webhook", "kueue-es-multikueue-edge")
    ]
    assert role["metadata"]["namespace"] == "kueue-es"
    named = {(g, r, v) for rule in role["rules"] if rule.get("resourceNames") for g in rule["apiGroups"]
             for r in rule["resources"] for v in rule["verbs"]}  # fmt: skip
    assert named == {("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "update")}
    assert grants(role["rules"]) - named == {("coordination.k8s.io", "leases", "create")}
    names = {n for rule in role["rules"] for n in rule.get("resourceNames", [])}
    assert names == {"kueue-es-watcher"}
    # the other RoleBinding: the visibility server's, to a built-in Role (test_visibility_is_an_aggregated...)
    (binding,) = [
        b
        for b in kinds("RoleBinding")
        if b["metadata"]["namespace"] == "kueue-es"
        and b["metadata"]["name"] not in ("kueue-es-webhook", "kueue-es-multikueue-edge")
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert {(s["name"], s["namespace"]) for s in binding["subjects"]} == {("kueue-es-watcher", "kueue-es")}


@pytest.mark.parametrize("service", SERVICES)
def test_health_port_probes_and_leader_election(service: str) -> None:
    """Every service serves its health port, probed over HTTP; the watcher elects a leader (the default Lease
    name kueue-es-watcher, in the pod's namespace); the dispatcher and the deciders take turns on the NATS
    standby lease (the deciders by default, the dispatcher with --standby-lease)."""
    from kueue_es.cli import _parser

    (container,) = pod_spec(find("Deployment", f"kueue-es-{service}"))["containers"]
    args = _parser().parse_args(container["args"])
    assert args.health_port == 8080 and args.health_host == "0.0.0.0"  # for the kubelet and Prometheus
    assert args.nats_user is None and args.nats_password_file is None  # from the environment
    assert container["ports"] == [{"name": "health", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    leads = service == "watcher"
    assert args.leader_elect is leads
    assert args.standby_lease is (True if service == "dispatcher" else None)
    env = {e["name"]: e for e in container["env"]}
    if leads:
        assert args.leader_elect_lease_name is None and args.leader_elect_namespace is None
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


@pytest.mark.parametrize(("owner", "spec", "container"), containers(), ids=lambda x: x if isinstance(x, str) else "")
def test_pods_are_locked_down(owner: str, spec: dict[str, Any], container: dict[str, Any]) -> None:
    pod = spec["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] >= 10000
    assert pod["seccompProfile"]["type"] == "RuntimeDefault"
    own = container["securityContext"]
    assert own["allowPrivilegeEscalation"] is False
    assert own["readOnlyRootFilesystem"] is True
    assert own["privileged"] is False
    assert own["capabilities"]["drop"] == ["ALL"]
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}, owner
    assert "livenessProbe" in container and "readinessProbe" in container
    assert not re.search(r":latest$|^[^:]+$", container["image"])
    assert not any(key in spec for key in ("hostNetwork", "hostPID", "hostIPC"))


def test_nats_cluster() -> None:
    nats = find("StatefulSet", "kueue-es-nats")
    assert nats["spec"]["replicas"] == 3
    assert nats["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    (container,) = pod_spec(nats)["containers"]
    env = {e["name"]: e for e in container["env"]}
    for user in (*NATS_USERS, "route"):
        variable = f"KQ_{user.upper().replace('-', '_')}_PASSWORD"
        assert env[variable]["valueFrom"]["secretKeyRef"] == {"name": "kueue-es-nats-users", "key": user}
    assert not any("$(" in arg for arg in container["args"])
    conf = (DEPLOY / "base" / "nats.conf").read_text()
    assert "jetstream" in conf and "store_dir: /data" in conf
    route_vars = re.findall(r"^\s+\$(KQ_ROUTE_\d)$", conf, re.MULTILINE)
    assert [env[v]["value"] for v in route_vars] == [
        f"nats://route:$(KQ_ROUTE_PASSWORD)@kueue-es-nats-{i}.kueue-es-nats-headless.kueue-es.svc:6222"
        for i in range(3)
    ]
    accounts = (DEPLOY / "base" / "nats-accounts.conf").read_text()
    assert re.findall(r"user: ([\w-]+)", accounts) == list(NATS_USERS)
    used = set(re.findall(r"\$(KQ_\w+_PASSWORD)", accounts + conf))
    assert used == {v for v in env if v.startswith("KQ_") and v.endswith("_PASSWORD")}


def nats_conf_blocks() -> dict[str, str]:
    """The top-level tls block and the cluster block of nats.conf, as text."""
    conf = (DEPLOY / "base" / "nats.conf").read_text()
    cluster = conf[conf.index("\ncluster {") :]
    return {"top": conf[: conf.index("\ncluster {")], "cluster": cluster[: cluster.index("\n}\n")]}


def test_nats_routes_are_authenticated_and_everything_is_tls() -> None:
    """Issue 13: a rogue nats-server joined the cluster (routes had no authorization), and nothing was
    encrypted. tests/bus/test_auth.py shows a server without the route password cannot join."""
    blocks = nats_conf_blocks()
    assert re.search(r"authorization \{\s+user: route\s+password: \$KQ_ROUTE_PASSWORD", blocks["cluster"])
    for where in ("top", "cluster"):
        tls = re.search(r"tls \{([^}]*)\}", blocks[where])
        assert tls is not None, where
        assert "cert_file: /etc/nats-tls/tls.crt" in tls.group(1) and "ca_file: /etc/nats-tls/ca.crt" in tls.group(1)
    assert "verify: true" in re.search(r"tls \{([^}]*)\}", blocks["cluster"]).group(1)  # type: ignore[union-attr]
    nats = find("StatefulSet", "kueue-es-nats")
    (container,) = pod_spec(nats)["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    (tls_volume,) = [v for v in pod_spec(nats)["volumes"] if v["name"] == "tls"]
    assert mounts["tls"] == "/etc/nats-tls" and tls_volume["secret"]["secretName"] == "kueue-es-nats-tls"


def test_nats_monitoring_is_reachable_only_inside_its_pods() -> None:
    """The monitoring port (8222) serves the kubelet's probes: no Service names it and no NetworkPolicy
    admits it (test_network_policies_... checks NATS accepts only 4222 and 6222)."""
    conf = (DEPLOY / "base" / "nats.conf").read_text()
    assert re.search(r"^http: [\d.]+:8222$", conf, re.MULTILINE)
    for service in kinds("Service"):
        ports = {p["port"] for p in service["spec"]["ports"]} | {p["targetPort"] for p in service["spec"]["ports"]}
        assert not ports & {8222, "monitor"}, service["metadata"]["name"]
    for policy in kinds("NetworkPolicy"):
        for rule in policy["spec"].get("ingress", []) + policy["spec"].get("egress", []):
            assert all(port.get("port") not in (8222, "monitor") for port in rule.get("ports", []))


def make_certificates(directory: Path) -> None:
    """ca.crt, tls.crt, tls.key as the Secret kueue-es-nats-tls holds them (openssl; skip without it)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    directory.mkdir()

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
        "-subj", "/CN=kueue-es-nats-ca")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj", "/CN=kueue-es-nats")
    (directory / "ext").write_text("subjectAltName=DNS:kueue-es-nats.kueue-es.svc\n")
    run("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "tls.crt", "-days", "1", "-extfile", "ext")  # fmt: skip


def test_nats_config_is_accepted_by_nats_server(tmp_path: Path) -> None:
    from kueue_es.events.bus import server

    for name in ("nats.conf", "nats-accounts.conf"):
        text = (DEPLOY / "base" / name).read_text()
        (tmp_path / name).write_text(text.replace("store_dir: /data", f"store_dir: {tmp_path / 'data'}"))
    make_certificates(tmp_path / "tls")
    for name in ("nats.conf",):
        text = (tmp_path / name).read_text().replace("/etc/nats-tls", str(tmp_path / "tls"))
        (tmp_path / name).write_text(text)
    env = {**os.environ, "POD_NAME": "kueue-es-nats-0", "KQ_ROUTE_PASSWORD": "pw-route"}
    env.update({f"KQ_{u.upper().replace('-', '_')}_PASSWORD": f"pw-{u}" for u in NATS_USERS})
    env.update({f"KQ_ROUTE_{i}": f"nats://route:pw-route@kueue-es-nats-{i}.nats:6222" for i in range(3)})
    result = subprocess.run(
        [str(server.find_binary()), "-c", str(tmp_path / "nats.conf"), "-t"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- network policies ---------------------------------------------------------------------------------


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_network_policies_deny_by_default_and_open_only_what_is_needed() -> None:
    policies = {p["metadata"]["name"]: p["spec"] for p in kinds("NetworkPolicy")}
    assert policies["kueue-es-default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    ingress_ports = {}
    for workload in [*kinds("Deployment"), *kinds("StatefulSet")]:
        labels = workload["spec"]["template"]["metadata"]["labels"]
        name = workload["metadata"]["name"]
        ingress_ports[name] = sorted(
            port["port"]
            for spec in policies.values()
            if selects(spec["podSelector"], labels)
            for rule in spec.get("ingress", [])
            for port in rule.get("ports", [])
        )
    assert ingress_ports == {
        **{f"kueue-es-{s}": [8080] for s in (*SERVICES, "compactor", "publisher", "multikueue-edge")},
        "kueue-es-visibility": [8080, 8082],
        "kueue-es-dashboard": [8080, 8090],  # 8080: every NATS client's metrics policy (the dashboard has none)
        "kueue-es-webhook": [9443],
        "kueue-es-provisioning": [],  # only the kubelet's probes reach its health port (no metrics)
        "kueue-es-nats": [4222, 6222],
    }
    (metrics,) = policies["kueue-es-metrics"]["ingress"]
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"kueue-es.dev/metrics": "allowed"}}}]
    kube_api = policies["kueue-es-kube-api"]
    assert kube_api["podSelector"]["matchLabels"] == {"kueue-es.dev/kube-api-client": "true"}


# -- enforcing management: the MutatingAdmissionPolicy --------------------------------------------------


def test_policy_suspends_queue_labelled_jobs_on_create() -> None:
    policy = find("MutatingAdmissionPolicy", "kueue-es-suspend-queued-jobs")
    spec = policy["spec"]
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule == {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}
    selector = spec["matchConstraints"]["objectSelector"]["matchExpressions"]
    assert selector == [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    (mutation,) = spec["mutations"]
    assert mutation["patchType"] == "ApplyConfiguration"
    assert mutation["applyConfiguration"]["expression"] == "Object{spec: Object.spec{suspend: true}}"
    assert spec["failurePolicy"] == "Fail"
    binding = find("MutatingAdmissionPolicyBinding", "kueue-es-suspend-queued-jobs")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]


def test_policy_and_emulator_agree_on_which_jobs_are_suspended() -> None:
    """The demo's emulated webhook (kueue_es/sim/emulator.py suspend_queued_jobs) suspends what the policy
    suspends: a Job with the queue-name label; one without it is left alone."""
    from kueue_es.sim import emulator

    jobs = resources.RESOURCES["batch/v1", "Job"]
    labelled = {"metadata": {"name": "a", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}}, "spec": {}}
    plain = {"metadata": {"name": "b"}, "spec": {}}
    emulator.suspend_queued_jobs(jobs, labelled)
    emulator.suspend_queued_jobs(jobs, plain)
    assert labelled["spec"].get("suspend") is True
    assert plain["spec"].get("suspend") is None


def test_watcher_reads_kueue_s_manager_configuration_where_kueue_does() -> None:
    """The ConfigMap kueue-manager-config (from controller_manager_config.yaml, in Kueue's format) is mounted
    into the watcher at /controller_manager_config.yaml and named by --config, as Kueue's manager has it; the
    deciders read it from the log, so of the services on NATS only the watcher mounts it (the webhook does too:
    test_webhook_manifests)."""
    from kueue_es.events import manager_config
    from tests.deploy.manifests import NOT_MANIFESTS

    kustomization = yaml.safe_load((DEPLOY / "base" / "kustomization.yaml").read_text())
    (generator,) = [g for g in kustomization["configMapGenerator"] if g["name"] == "kueue-manager-config"]
    assert generator["files"] == list(NOT_MANIFESTS)
    parsed = manager_config.parse((DEPLOY / "base" / NOT_MANIFESTS[0]).read_text(), source=NOT_MANIFESTS[0])
    from kueue_es.services.watcher.kinds import FRAMEWORK_KINDS

    assert parsed.frameworks and all(name in FRAMEWORK_KINDS for name in parsed.frameworks)
    for service in SERVICES:
        spec = pod_spec(find("Deployment", f"kueue-es-{service}"))
        (container,) = spec["containers"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = [m for m in container["volumeMounts"] if m["name"] in volumes and "configMap" in volumes[m["name"]]]
        config_mounts = [m for m in mounts if volumes[m["name"]]["configMap"]["name"] == "kueue-manager-config"]
        if service != "watcher":
            assert not config_mounts and not any(a.startswith("--config") for a in container["args"])
            continue
        assert config_mounts == [
            {
                "name": "manager-config",
                "mountPath": "/controller_manager_config.yaml",
                "subPath": "controller_manager_config.yaml",
                "readOnly": True,
            }
        ]
        assert "--config=/controller_manager_config.yaml" in container["args"]


def test_visibility_is_an_aggregated_api_server_as_kueue_ships_it() -> None:
    """Kueue's config/components/visibility: two APIServices (v1beta2, v1beta1) to the Service
    visibility-server (443 to the https port 8082), insecureSkipTLSVerify; the server runs with delegated
    authentication and authorization and exactly the two bindings those need; it reads NATS as reader."""
    for version in ("v1beta2", "v1beta1"):
        spec = find("APIService", f"{version}.visibility.kueue.x-k8s.io")["spec"]
        assert spec == {
            "group": "visibility.kueue.x-k8s.io",
            "groupPriorityMinimum": 100,
            "insecureSkipTLSVerify": True,
            "service": {"name": "visibility-server", "namespace": "kueue-es"},
            "version": version,
            "versionPriority": 100,
        }
    service = find("Service", "visibility-server")["spec"]
    assert service["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"}]
    deployment = find("Deployment", "kueue-es-visibility")
    assert selects({"matchLabels": service["selector"]}, deployment["spec"]["template"]["metadata"]["labels"])
    spec = pod_spec(deployment)
    (container,) = spec["containers"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": 8080, "https": 8082}
    args = container["args"]
    assert args[:2] == ["service", "visibility"] and "--delegated-auth" in args
    assert args[args.index("--api-port") + 1] == "8082"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUEUE_ES_NATS_USER"] == "reader"
    assert spec["serviceAccountName"] == "kueue-es-visibility" and spec["automountServiceAccountToken"] is True
    roles = {
        (b["kind"], b["metadata"].get("namespace"), b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in [*kinds("ClusterRoleBinding"), *kinds("RoleBinding")]
        if b["subjects"][0]["name"] == "kueue-es-visibility"
    }
    assert roles == {
        ("ClusterRoleBinding", None, "ClusterRole", "system:auth-delegator"),
        ("RoleBinding", "kube-system", "Role", "extension-apiserver-authentication-reader"),
    }


@pytest.mark.parametrize("service", ["admitter", "preemptor", "tas-placer", "multikueue"])
def test_deciders_decide_every_partition(service: str) -> None:
    """deploy/ cannot leave a partition without a decider: its replicas run --partitions all over the lease
    slots (every partition has a slot, every slot a holder while one replica lives), never a static list,
    and the CLI takes their --partition-slots (it refuses it where there are no slots)."""
    from kueue_es.cli import _parser, _partition_slots_problem

    (container,) = pod_spec(find("Deployment", f"kueue-es-{service}"))["containers"]
    args = _parser().parse_args(container["args"])
    assert args.partitions is None and args.standby_lease is not False
    assert args.partition_slots == 16 and _partition_slots_problem(args) is None


def test_dashboard_reads_as_reader_without_a_token_and_serves_http() -> None:
    """kueue-es dashboard (docs/dashboard.md): the read-only NATS user, no Kubernetes token, its port behind a
    Service and a policy that admits only namespaces labelled for it."""
    from kueue_es.cli import _parser

    deployment = find("Deployment", "kueue-es-dashboard")
    spec = pod_spec(deployment)
    (container,) = spec["containers"]
    args = _parser().parse_args(container["args"])
    assert container["args"][0] == "dashboard"
    assert (args.nats, args.host, args.port) == ("tls://kueue-es-nats.kueue-es.svc:4222", "0.0.0.0", 8090)
    assert args.nats_user is None and args.nats_password_file is None  # from the environment
    assert_nats_credentials(deployment, user="reader")
    assert spec["automountServiceAccountToken"] is False and spec["serviceAccountName"] == "kueue-es-dashboard"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    service = find("Service", "kueue-es-dashboard")["spec"]
    assert service["ports"] == [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]
    policy = find("NetworkPolicy", "kueue-es-dashboard")["spec"]
    assert policy["ingress"] == [
        {
            "from": [{"namespaceSelector": {"matchLabels": {"kueue-es.dev/dashboard": "allowed"}}}],
            "ports": [{"protocol": "TCP", "port": 8090}],
        }
    ]
