"""The webhook service over HTTPS: AdmissionReviews shaped as kube-apiserver sends them, and its certificates.

The client verifies the server with the CA the server made (no insecure TLS); mutations are checked by
applying the returned JSONPatch to the object; rotation runs against the emulated API server with a
clock the test moves.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import jsonpatch
import pytest
from cryptography import x509
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, resources
from kueue_es.services.webhook import certs, rotation, server
from kueue_es.sim import emulator

QUEUE = "kueue.x-k8s.io/queue-name"
ROOT = Path(__file__).resolve().parents[2]


def admission_review(
    *,
    group: str,
    version: str,
    kind: str,
    resource: str,
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    namespace: str = "team",
    dry_run: bool = False,
) -> dict[str, Any]:
    """An AdmissionReview v1 request as kube-apiserver writes it (staging/src/k8s.io/api/admission/v1)."""
    name = ((obj or old or {}).get("metadata") or {}).get("name", "")
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {
                "apiVersion": "meta.k8s.io/v1",
                "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
            },
        },
    }


def sample_job(*, labels: dict[str, str] | None = None, suspend: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": 3,
        "completions": 3,
        "template": {"spec": {"containers": [{"name": "dummy-job", "image": "busybox"}], "restartPolicy": "Never"}},
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"generateName": "sample-job-", "namespace": "team", "labels": labels or {}},
        "spec": spec,
    }


@pytest.fixture
async def webhook(tmp_path: Path) -> AsyncIterator[tuple[str, ssl.SSLContext]]:
    """The webhook service on a free port with its self-signed localhost certificate; yields its URL and
    a client TLS context that trusts only the CA it made."""
    stop = asyncio.Event()
    urls: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(server.serve_webhook(stop=stop, cert_dir=tmp_path, port=0, started=urls.put_nowait))
    url = await asyncio.wait_for(urls.get(), 30)
    trust = ssl.create_default_context(cafile=str(tmp_path / certs.CA_CERT))
    try:
        yield url, trust
    finally:
        stop.set()
        await task


async def post(url: str, trust: ssl.SSLContext, path: str, review: dict[str, Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.post(url + path, json=review, ssl=trust) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def test_a_queued_job_is_suspended_by_a_jsonpatch(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    job = sample_job(labels={QUEUE: "user-queue"})
    review = admission_review(
        group="batch", version="v1", kind="Job", resource="jobs", operation="CREATE", obj=job, dry_run=True
    )
    answer = await post(url, trust, "/mutate-batch-v1-job", review)
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(job, json.loads(base64.b64decode(response["patch"])))
    assert patched["spec"]["suspend"] is True
    assert patched["metadata"]["labels"] == {QUEUE: "user-queue"}


async def test_an_unqueued_job_is_allowed_without_a_patch(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    review = admission_review(
        group="batch", version="v1", kind="Job", resource="jobs", operation="CREATE", obj=sample_job()
    )
    response = (await post(url, trust, "/mutate-batch-v1-job", review))["response"]
    assert response == {"uid": review["request"]["uid"], "allowed": True}


async def test_a_queued_pod_is_gated(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {QUEUE: "user-queue"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    review = admission_review(group="", version="v1", kind="Pod", resource="pods", operation="CREATE", obj=pod)
    response = (await post(url, trust, "/mutate--v1-pod", review))["response"]
    patched = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
    assert patched["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert {"name": "kueue.x-k8s.io/admission"} in patched["spec"]["schedulingGates"]


async def test_a_pytorchjob_is_suspended_through_its_run_policy(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "team", "labels": {QUEUE: "user-queue"}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": []}}}}},
    }
    review = admission_review(
        group="kubeflow.org", version="v1", kind="PyTorchJob", resource="pytorchjobs", operation="CREATE", obj=job
    )
    response = (await post(url, trust, "/mutate-kubeflow-org-v1-pytorchjob", review))["response"]
    patched = jsonpatch.apply_patch(job, json.loads(base64.b64decode(response["patch"])))
    assert patched["spec"]["runPolicy"] == {"suspend": True}


async def test_an_invalid_queue_name_is_denied_with_kueues_message(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    review = admission_review(
        group="batch",
        version="v1",
        kind="Job",
        resource="jobs",
        operation="CREATE",
        obj=sample_job(labels={QUEUE: "Bad_Queue"}),
    )
    response = (await post(url, trust, "/validate-batch-v1-job", review))["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
    assert response["status"]["message"].startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Bad_Queue": a lowercase RFC 1123 subdomain'
    )


async def test_moving_an_admitted_job_to_another_queue_is_denied(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    old = {
        **sample_job(labels={QUEUE: "a"}, suspend=False),
        "metadata": {"name": "j", "namespace": "team", "labels": {QUEUE: "a"}},
    }
    new = {**old, "metadata": {"name": "j", "namespace": "team", "labels": {QUEUE: "b"}}}
    review = admission_review(
        group="batch", version="v1", kind="Job", resource="jobs", operation="UPDATE", obj=new, old=old
    )
    response = (await post(url, trust, "/validate-batch-v1-job", review))["response"]
    assert response["allowed"] is False
    assert (
        response["status"]["message"]
        == 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    )
    # the same change on a suspended Job is allowed
    old["spec"]["suspend"] = new["spec"]["suspend"] = True
    review = admission_review(
        group="batch", version="v1", kind="Job", resource="jobs", operation="UPDATE", obj=new, old=old
    )
    assert (await post(url, trust, "/validate-batch-v1-job", review))["response"]["allowed"] is True


def sample_workload(**pod_set: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "team"},
        "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 2, "template": template, **pod_set}]},
    }


async def test_kueues_workload_webhooks_are_served(webhook: tuple[str, ssl.SSLContext]) -> None:
    """vworkload.kb.io (workload_webhook.go ValidateWorkload, ValidateWorkloadUpdate) over HTTPS: a Workload whose
    pod set asks for Kueue's own ``pods`` resource is denied with Kueue's field error, a valid one allowed, and
    a status update reserving quota without an admission denied; mworkload.kb.io leaves ``minCount`` (the gate
    PartialAdmission on by default)."""
    url, trust = webhook
    kind = {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "Workload"}
    bad = sample_workload()
    bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["pods"] = "1"
    review = admission_review(**kind, resource="workloads", operation="CREATE", obj=bad)
    response = (await post(url, trust, "/validate-kueue-x-k8s-io-v1beta2-workload", review))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"] == (
        'spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "pods": the key is '
        "reserved for internal kueue use"
    )
    good = sample_workload(minCount=1)
    review = admission_review(**kind, resource="workloads", operation="CREATE", obj=good)
    assert (await post(url, trust, "/validate-kueue-x-k8s-io-v1beta2-workload", review))["response"]["allowed"]
    response = (await post(url, trust, "/mutate-kueue-x-k8s-io-v1beta2-workload", review))["response"]
    assert response == {"uid": review["request"]["uid"], "allowed": True}
    reserved = {**good, "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}
    review = admission_review(**kind, resource="workloads", operation="UPDATE", obj=reserved, old=good)
    response = (await post(url, trust, "/validate-kueue-x-k8s-io-v1beta2-workload", review))["response"]
    assert response["status"]["message"] == (
        "status.admission: Required value: must be set while the QuotaReserved condition is true"
    )


async def test_the_workload_webhook_drops_min_count_without_partial_admission(tmp_path: Path) -> None:
    """mworkload.kb.io (workload_webhook.go Default) with the gate PartialAdmission off: a JSONPatch removing every
    pod set's minCount."""
    application = server.app(feature_gates={"PartialAdmission": False})
    review = admission_review(
        group="kueue.x-k8s.io",
        version="v1beta2",
        kind="Workload",
        resource="workloads",
        operation="CREATE",
        obj=sample_workload(minCount=1),
    )
    runner = aiohttp.web.AppRunner(application)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"http://127.0.0.1:{port}/mutate-kueue-x-k8s-io-v1beta2-workload", json=review) as answer,
        ):
            response = (await answer.json())["response"]
    finally:
        await runner.cleanup()
    patched = jsonpatch.apply_patch(review["request"]["object"], json.loads(base64.b64decode(response["patch"])))
    assert "minCount" not in patched["spec"]["podSets"][0]


async def test_a_rayjob_is_denied_with_kueues_ray_messages(webhook: tuple[str, ssl.SSLContext]) -> None:
    """rayjob_webhook.go validateCreate, over HTTPS as kube-apiserver calls it: Kueue's types and words for a
    RayJob that keeps its cluster and names a worker group ``head``, aggregated as Kubernetes does."""
    url, trust = webhook
    head = {"template": {"spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray"}]}}}
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "team", "labels": {QUEUE: "user-queue"}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "rayClusterSpec": {
                "headGroupSpec": head,
                "workerGroupSpecs": [{"groupName": "head", "replicas": 1, **head}],
            },
        },
    }
    review = admission_review(
        group="ray.io", version="v1", kind="RayJob", resource="rayjobs", operation="CREATE", obj=job
    )
    response = (await post(url, trust, "/validate-ray-io-v1-rayjob", review))["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403
    assert response["status"]["message"] == (
        "[spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster after "
        'finishing, spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head '
        "group]"
    )


async def test_bad_requests_and_probes(webhook: tuple[str, ssl.SSLContext]) -> None:
    url, trust = webhook
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/validate-batch-v1-job", json={"kind": "Nope"}, ssl=trust) as response:
            assert response.status == 400
        async with session.post(url + "/mutate-example-com-v1-widget", json={}, ssl=trust) as response:
            assert response.status == 404
        async with session.get(url + "/readyz", ssl=trust) as response:
            assert response.status == 200
    # a client that does not trust the server's CA is refused at the handshake
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with session.get(url + "/healthz", ssl=ssl.create_default_context()):
                pass


async def test_crd_conversion_reviews_are_answered_at_convert(webhook: tuple[str, ssl.SSLContext]) -> None:
    """``/convert`` answers the ConversionReview a CRD with the Webhook strategy sends (Kueue's path): every object
    in the desired version by Kueue's rules; a body that is not a ConversionReview is 400, a GET 405."""
    url, trust = webhook
    uid = str(uuid.uuid4())
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"cohort": "team", "admissionChecks": ["check"]},
    }
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": "kueue.x-k8s.io/v1beta2", "objects": [queue]},
    }
    answer = await post(url, trust, "/convert", review)
    assert answer["response"]["uid"] == uid and answer["response"]["result"] == {"status": "Success"}
    [converted] = answer["response"]["convertedObjects"]
    assert converted["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert converted["spec"] == {
        "cohortName": "team",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "check"}]},
    }
    async with aiohttp.ClientSession() as session:
        async with session.post(url + "/convert", json={"kind": "AdmissionReview"}, ssl=trust) as response:
            assert response.status == 400
        async with session.get(url + "/convert", ssl=trust) as response:
            assert response.status == 405


# -- internal certificate management -------------------------------------------------------------

WEBHOOK_KINDS = (rotation.SECRETS, rotation.MUTATING_CONFIGS, rotation.VALIDATING_CONFIGS)


@pytest.fixture
async def cluster() -> AsyncIterator[emulator.ClusterEmulator]:
    async with emulator.serve_emulator(extra_resources=WEBHOOK_KINDS) as served:
        yield served


@pytest.fixture
async def api(cluster: emulator.ClusterEmulator) -> AsyncIterator[k8s_client.ApiClient]:
    api_client = await client.make_api_client(server=str(cluster.url))
    try:
        yield api_client
    finally:
        await api_client.close()


def webhook_configuration(ref: resources.ResourceRef, name: str) -> dict[str, Any]:
    hook = {
        "name": "vjob.kb.io" if "Validating" in ref.kind else "mjob.kb.io",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": "kueue-es-webhook-service", "namespace": "kueue-es", "path": "/x"}},
        "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["jobs"]}],
    }
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": {"name": name},
        "webhooks": [hook, {**hook, "name": "x" + hook["name"]}],
    }


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now


async def test_rotation_renews_a_near_expiry_certificate_and_updates_the_ca_bundle(
    api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    settings = rotation.Settings()
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-es"}}
    await client.create_object(api, resources.NAMESPACES, body=namespace)
    for ref, name in (
        (rotation.MUTATING_CONFIGS, settings.mutating_name),
        (rotation.VALIDATING_CONFIGS, settings.validating_name),
    ):
        await client.create_object(api, ref, body=webhook_configuration(ref, name))
    clock = Clock()
    rotator = rotation.Rotator(api, settings, cert_dir=tmp_path, clock=clock)

    assert await rotator.check() is True  # first pass: a new CA and certificate
    assert rotator.injected
    secret = await client.get_object(api, rotation.SECRETS, namespace="kueue-es", name=settings.secret_name)
    first_ca = base64.b64decode(secret["data"]["ca.crt"])
    first_cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = first_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )
    assert "kueue-es-webhook-service.kueue-es.svc" in names
    assert first_cert.not_valid_after_utc - clock.now > datetime.timedelta(days=360)
    first_cert.verify_directly_issued_by(x509.load_pem_x509_certificate(first_ca))
    for ref, name in (
        (rotation.MUTATING_CONFIGS, settings.mutating_name),
        (rotation.VALIDATING_CONFIGS, settings.validating_name),
    ):
        config = await client.get_object(api, ref, name=name)
        assert rotation.ca_bundles(config) == [base64.b64encode(first_ca).decode()] * 2
    assert (tmp_path / "tls.crt").read_bytes() == base64.b64decode(secret["data"]["tls.crt"])

    # half a year later nothing is due
    clock.now += datetime.timedelta(days=180)
    assert await rotator.check() is False

    # within 90 days of the serving certificate's end: a new certificate from the same CA
    clock.now = first_cert.not_valid_after_utc - datetime.timedelta(days=89)
    assert await rotator.check() is True
    secret = await client.get_object(api, rotation.SECRETS, namespace="kueue-es", name=settings.secret_name)
    second_cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert second_cert.serial_number != first_cert.serial_number
    assert second_cert.not_valid_after_utc > first_cert.not_valid_after_utc
    assert base64.b64decode(secret["data"]["ca.crt"]) == first_ca
    assert (tmp_path / "tls.crt").read_bytes() == base64.b64decode(secret["data"]["tls.crt"])

    # near the CA's end: a new CA, and the bundle in both configurations follows
    ca_end = x509.load_pem_x509_certificate(first_ca).not_valid_after_utc
    clock.now = ca_end - datetime.timedelta(days=30)
    assert await rotator.check() is True
    secret = await client.get_object(api, rotation.SECRETS, namespace="kueue-es", name=settings.secret_name)
    new_ca = base64.b64decode(secret["data"]["ca.crt"])
    assert new_ca != first_ca
    for ref, name in (
        (rotation.MUTATING_CONFIGS, settings.mutating_name),
        (rotation.VALIDATING_CONFIGS, settings.validating_name),
    ):
        config = await client.get_object(api, ref, name=name)
        assert rotation.ca_bundles(config) == [base64.b64encode(new_ca).decode()] * 2


async def test_rotation_puts_the_ca_into_the_crds_conversion_webhook(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    """The CRDs of deploy/crds that convert through the webhook service get its CA in their conversion webhook's
    caBundle, as Kueue's cert-controller gives its own CRDs; a CRD converted by another service (Kueue's) and
    the CRDs with strategy None are left alone."""
    from kueue_es import crds

    settings = rotation.Settings()
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-es"}}
    await client.create_object(api, resources.NAMESPACES, body=namespace)
    for ref, name in (
        (rotation.MUTATING_CONFIGS, settings.mutating_name),
        (rotation.VALIDATING_CONFIGS, settings.validating_name),
    ):
        await client.create_object(api, ref, body=webhook_configuration(ref, name))
    documents = crds.all_crds()
    kueues = next(d for d in documents if d["metadata"]["name"] == "cohorts.kueue.x-k8s.io")
    kueues["spec"]["conversion"]["webhook"]["clientConfig"]["service"].update(
        name="webhook-service", namespace="kueue-system"
    )
    cluster.install_crds(documents)
    rotator = rotation.Rotator(api, settings, cert_dir=tmp_path)
    await rotator.check()
    assert rotator.bundle is not None
    bundle = base64.b64encode(rotator.bundle.ca_cert).decode()
    found = {}
    for document in documents:
        name = document["metadata"]["name"]
        stored = await client.get_object(api, rotation.CRDS, name=name)
        found[name] = ((stored["spec"]["conversion"].get("webhook") or {}).get("clientConfig") or {}).get("caBundle")
    assert {name for name, ca in found.items() if ca == bundle} == {
        "clusterqueues.kueue.x-k8s.io",
        "localqueues.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
        "multikueueclusters.kueue.x-k8s.io",
    }
    assert {ca for name, ca in found.items() if ca != bundle} == {None}


async def test_a_second_replica_uses_the_stored_certificates(api: k8s_client.ApiClient, tmp_path: Path) -> None:
    settings = rotation.Settings(namespace="default")
    one = rotation.Rotator(api, settings, cert_dir=tmp_path / "one", clock=Clock())
    two = rotation.Rotator(api, settings, cert_dir=tmp_path / "two", clock=Clock())
    await one.check()
    assert not one.injected  # no configurations in this cluster yet
    await two.check()
    assert (tmp_path / "one" / "tls.crt").read_bytes() == (tmp_path / "two" / "tls.crt").read_bytes()


async def test_the_server_serves_the_rotated_certificate(api: k8s_client.ApiClient, tmp_path: Path) -> None:
    """With a certificate for 127.0.0.1, a client trusting the Secret's CA reaches the server; after the
    certificate is renewed the server presents the new one without restarting."""
    settings = rotation.Settings(namespace="default", service_name="127.0.0.1")
    clock = Clock()
    clock.now = datetime.datetime.now(datetime.UTC)
    rotator = rotation.Rotator(api, settings, cert_dir=tmp_path, clock=clock)
    await rotator.check()
    serving = server.ServingCerts(tmp_path)
    assert serving.reload()
    # the certificate's first name is <service>.<namespace>.svc; add the address for this test's client
    bundle = rotator.bundle
    assert bundle is not None
    cert, key = certs.new_serving_cert(bundle.ca_cert, bundle.ca_key, ["127.0.0.1"], clock.now)
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    assert serving.reload()
    trust = ssl.create_default_context(cadata=bundle.ca_cert.decode())
    async with server.serve_https(server.app(), host="127.0.0.1", port=0, context=serving.context) as url:
        async with aiohttp.ClientSession() as session, session.get(url + "/healthz", ssl=trust) as response:
            assert response.status == 200
        assert await served_serial(url, trust) == x509.load_pem_x509_certificate(cert).serial_number
        renewed_cert, renewed_key = certs.new_serving_cert(bundle.ca_cert, bundle.ca_key, ["127.0.0.1"], clock.now)
        (tmp_path / "tls.crt").write_bytes(renewed_cert)
        (tmp_path / "tls.key").write_bytes(renewed_key)
        assert serving.reload()
        assert await served_serial(url, trust) == x509.load_pem_x509_certificate(renewed_cert).serial_number


async def served_serial(url: str, trust: ssl.SSLContext) -> int:
    """The serial number of the certificate the server presents to a new, verifying connection."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), ssl=trust, server_hostname=host)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


# -- the emulated API server applies the same rules ----------------------------------------------


async def test_the_emulator_refuses_what_the_validating_webhook_refuses(tmp_path: Path) -> None:
    """Through the emulated API server (as kubectl reaches it): a Job with a bad queue name is refused 403
    with kube-apiserver's wording for a denying webhook; a suspended Job may move queues, a running one not."""
    from kueue_es.services.kube import errors

    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            bad = sample_job(labels={QUEUE: "Bad_Queue"})
            bad["metadata"]["namespace"] = "default"
            with pytest.raises(errors.ApiError) as refused:
                await client.create_object(api, resources.JOBS, namespace="default", body=bad)
            assert refused.value.status == 403 and refused.value.reason == "Forbidden"
            assert refused.value.message.startswith(
                'admission webhook "vjob.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/queue-name]:'
                ' Invalid value: "Bad_Queue"'
            )
            good = sample_job(labels={QUEUE: "a"})
            good["metadata"] = {"name": "j", "namespace": "default", "labels": {QUEUE: "a"}}
            created = await client.create_object(api, resources.JOBS, namespace="default", body=good)
            assert created["spec"]["suspend"] is True  # the mutating rules: created suspended
            moved = await client.patch_object(
                api, resources.JOBS, namespace="default", name="j", patch={"metadata": {"labels": {QUEUE: "b"}}}
            )
            assert moved["metadata"]["labels"][QUEUE] == "b"
            await client.patch_object(
                api, resources.JOBS, namespace="default", name="j", patch={"spec": {"suspend": False}}
            )
            with pytest.raises(errors.ApiError) as immutable:
                await client.patch_object(
                    api, resources.JOBS, namespace="default", name="j", patch={"metadata": {"labels": {QUEUE: "c"}}}
                )
            assert immutable.value.status == 403
            assert immutable.value.message.endswith(
                'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "c": field is immutable'
            )
        finally:
            await api.close()


def test_a_certificate_for_another_name_is_made_again_from_the_same_ca() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    bundle = certs.new_bundle(["old-service.kueue-es.svc"], now)
    assert certs.renewed(bundle, ["old-service.kueue-es.svc"], now) is None
    renewed = certs.renewed(bundle, ["new-service.kueue-es.svc"], now)
    assert renewed is not None and renewed.ca_cert == bundle.ca_cert and renewed.cert != bundle.cert
    assert certs.serving_usable(renewed, ["new-service.kueue-es.svc"], now)
    # a broken CA gives a new CA and certificate
    broken = certs.Bundle(ca_cert=b"garbage", ca_key=bundle.ca_key, cert=bundle.cert, key=bundle.key)
    fresh = certs.renewed(broken, ["new-service.kueue-es.svc"], now)
    assert fresh is not None and fresh.ca_cert != bundle.ca_cert


async def test_a_job_of_a_multikueue_queue_is_managed_by_multikueue(tmp_path: Path) -> None:
    """Kueue's ApplyDefaultForManagedBy through the API server: a queued Job whose LocalQueue's ClusterQueue
    has a MultiKueue admission check gets ``spec.managedBy: kueue.x-k8s.io/multikueue``; one in a queue
    without it does not (docs/multikueue.md)."""
    from kueue_es.events.manifests import load_documents

    setup = ROOT / "kueue_es" / "demo_manifests" / "multikueue-setup.yaml"
    async with emulator.serve_emulator() as emu:
        api = await client.make_api_client(server=emu.url)
        try:
            for doc in load_documents(setup.read_text(), source=str(setup)):
                await client.apply_manifest(api, doc)
            await client.apply_manifest(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
            await client.apply_manifest(
                api,
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "user-queue", "namespace": "team"},
                    "spec": {"clusterQueue": "cluster-queue"},
                },
            )
            stop = asyncio.Event()
            urls: asyncio.Queue[str] = asyncio.Queue()
            task = asyncio.create_task(
                server.serve_webhook(stop=stop, cert_dir=tmp_path, port=0, api=api, started=urls.put_nowait)
            )
            try:
                url = await asyncio.wait_for(urls.get(), 30)
                trust = ssl.create_default_context(cafile=str(tmp_path / certs.CA_CERT))
                managed = {}
                for queue in ("user-queue", "other-queue"):
                    job = sample_job(labels={QUEUE: queue})
                    review = admission_review(
                        group="batch", version="v1", kind="Job", resource="jobs", operation="CREATE", obj=job
                    )
                    response = (await post(url, trust, "/mutate-batch-v1-job", review))["response"]
                    patched = jsonpatch.apply_patch(job, json.loads(base64.b64decode(response["patch"])))
                    managed[queue] = patched["spec"].get("managedBy")
                assert managed == {"user-queue": "kueue.x-k8s.io/multikueue", "other-queue": None}
            finally:
                stop.set()
                await task
        finally:
            await api.close()


async def test_a_local_queue_naming_no_cluster_queue_is_no_multikueue_queue(
    api: k8s_client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kueue's LocalQueue may name no ClusterQueue (spec.clusterQueue optional): the MultiKueue lookup of the Job
    webhook (ApplyDefaultForManagedBy) finds no ClusterQueue for it and reads no other object: a GET of the name
    "" would be a LIST of every ClusterQueue."""
    await client.create_object(
        api,
        resources.LOCAL_QUEUES,
        namespace="default",
        body={"apiVersion": resources.KUEUE_V1BETA2, "kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {}},
    )
    read: list[tuple[str, str]] = []
    get_object = client.get_object

    async def recording(api: k8s_client.ApiClient, ref: resources.ResourceRef, **kwargs: Any) -> dict[str, Any]:
        read.append((ref.kind, kwargs["name"]))
        return await get_object(api, ref, **kwargs)

    monkeypatch.setattr(client, "get_object", recording)
    assert await server.api_multikueue_lookup(api)("default", "lq") is False
    assert read == [("LocalQueue", "lq")]
