"""Kueue's no-op webhook for a framework the Configuration leaves out, from ``kueue-es service webhook``.

Kueue sets up a webhook for every framework (jobframework/setup.go): the enabled ones with their rules, the
others ``WithNoopWebhook`` (pkg/util/webhook/noop_webhook.go), which admits every request unchanged. The
webhook configurations list every framework, so kube-apiserver calls the server for a left-out kind too.
Before, the server applied the full rules to every kind whatever ``--config`` said: a queue-labelled pod was
created gated and a PyTorchJob suspended, with no watcher ever to admit them (the watcher watches only the
enabled frameworks), where Kueue lets them run unmanaged. The requests here are shaped as kube-apiserver
sends them (:func:`tests.kube.test_webhook_server.admission_review`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch

from kueue_es.cli import MANAGE_ENV
from kueue_es.events import manager_config
from kueue_es.jobframework import webhooks
from kueue_es.services.webhook import certs, server
from tests.kube.test_webhook_server import QUEUE, admission_review, post, sample_job
from tests.restartable import free_port

CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def configuration(*frameworks: str) -> str:
    """Kueue's Configuration listing ``frameworks`` (none: the section left out, Kueue's default)."""
    if not frameworks:
        return CONFIG
    return CONFIG + "integrations:\n  frameworks:\n" + "".join(f'  - "{name}"\n' for name in frameworks)


@contextlib.asynccontextmanager
async def serving(cert_dir: Path, config: str) -> AsyncIterator[tuple[str, ssl.SSLContext]]:
    """The webhook service under the Configuration ``config``, on a free port; yields its URL and a client TLS
    context trusting only its CA."""
    managed = webhooks.enabled_kinds(manager_config.parse(config).frameworks)
    stop = asyncio.Event()
    urls: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(
        server.serve_webhook(stop=stop, cert_dir=cert_dir, port=0, managed_kinds=managed, started=urls.put_nowait)
    )
    try:
        url = await asyncio.wait_for(urls.get(), 30)
        yield url, ssl.create_default_context(cafile=str(cert_dir / certs.CA_CERT))
    finally:
        stop.set()
        await task


def queued_pod(**labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team", "labels": {QUEUE: "user-queue", **labels}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def pytorchjob(queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "team", "labels": {QUEUE: queue}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": []}}}}},
    }


def apps(kind: str, queue: str = "user-queue") -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "web", "namespace": "team", "labels": {QUEUE: queue}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template},
    }


def review_of(obj: dict[str, Any], resource: str, *, operation: str = "CREATE") -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    old = obj if operation == "UPDATE" else None
    return admission_review(
        group=group, version=version, kind=obj["kind"], resource=resource, operation=operation, obj=obj, old=old
    )


async def answer(
    webhook: tuple[str, ssl.SSLContext], verb: str, obj: dict[str, Any], resource: str, *, operation: str = "CREATE"
) -> dict[str, Any]:
    """The ``response`` of the webhook at Kueue's path for ``obj``'s kind; the uid is checked and dropped."""
    url, trust = webhook
    served = webhooks.target(obj["apiVersion"], obj["kind"])
    assert served is not None
    review = review_of(obj, resource, operation=operation)
    response = dict((await post(url, trust, served.path(verb), review))["response"])
    assert response.pop("uid") == review["request"]["uid"]
    return response


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True and response["patchType"] == "JSONPatch", response
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


ALLOWED = {"allowed": True}  # Kueue's no-op webhook: allowed, no patch, no warnings


async def test_kinds_of_frameworks_left_out_are_admitted_unchanged(tmp_path: Path) -> None:
    """A Configuration listing no frameworks gets Kueue's default, ``batch/job``: Jobs are still suspended
    and validated; pods, PyTorchJobs and Deployments, whatever they hold, are allowed unchanged."""
    async with serving(tmp_path, configuration()) as webhook:
        job = sample_job(labels={QUEUE: "q"})
        assert patched(job, await answer(webhook, "mutate", job, "jobs"))["spec"]["suspend"] is True
        bad_job = sample_job(labels={QUEUE: "Bad_Queue"})
        assert (await answer(webhook, "validate", bad_job, "jobs"))["allowed"] is False

        assert await answer(webhook, "mutate", queued_pod(), "pods") == ALLOWED  # not gated
        refused_label = queued_pod(**{webhooks.MANAGED_LABEL: "false"})
        assert await answer(webhook, "validate", refused_label, "pods") == ALLOWED
        assert await answer(webhook, "mutate", pytorchjob("user-queue"), "pytorchjobs") == ALLOWED  # not suspended
        assert await answer(webhook, "validate", pytorchjob("Bad_Queue"), "pytorchjobs") == ALLOWED
        for operation in ("CREATE", "UPDATE"):  # Kueue calls a Deployment's mutating webhook on both
            deployment = apps("Deployment")
            assert await answer(webhook, "mutate", deployment, "deployments", operation=operation) == ALLOWED
        assert await answer(webhook, "validate", apps("Deployment", "Bad_Queue"), "deployments") == ALLOWED


async def test_a_kind_run_through_pods_enables_the_pod_webhook(tmp_path: Path) -> None:
    """``deployment`` alone: its pods are what Kueue gates, so the pod webhook is Kueue's own too
    (ImplicitlyEnabledFrameworkNames); a StatefulSet and a Job, left out, are admitted unchanged."""
    async with serving(tmp_path, configuration("deployment")) as webhook:
        pod = patched(queued_pod(), await answer(webhook, "mutate", queued_pod(), "pods"))
        assert {"name": webhooks.ADMISSION_GATE} in pod["spec"]["schedulingGates"]
        refused = await answer(webhook, "validate", queued_pod(**{webhooks.MANAGED_LABEL: "false"}), "pods")
        assert refused["allowed"] is False and "managed label value can only be 'true'" in refused["status"]["message"]
        deployment = patched(apps("Deployment"), await answer(webhook, "mutate", apps("Deployment"), "deployments"))
        assert deployment["spec"]["template"]["metadata"]["labels"][QUEUE] == "user-queue"

        assert await answer(webhook, "mutate", apps("StatefulSet"), "statefulsets") == ALLOWED
        assert await answer(webhook, "validate", apps("StatefulSet", "Bad_Queue"), "statefulsets") == ALLOWED
        assert await answer(webhook, "mutate", sample_job(labels={QUEUE: "q"}), "jobs") == ALLOWED
        assert await answer(webhook, "validate", sample_job(labels={QUEUE: "Bad_Queue"}), "jobs") == ALLOWED


@contextlib.asynccontextmanager
async def command(
    tmp_path: Path, config: str, *, kube_server: str | None = None
) -> AsyncIterator[tuple[str, ssl.SSLContext]]:
    """``kueue-es service webhook --config FILE`` as a process of its own, the file holding ``config``, with
    no Kubernetes API or the one at ``kube_server`` (``--kube-server``); yields its URL and a client TLS
    context trusting only its CA."""
    config_file = tmp_path / "controller_manager_config.yaml"
    config_file.write_text(config)
    cert_dir = tmp_path / "certs"
    port = free_port()
    # no Kubernetes API, and no --manage-jobs-without-queue-name from the environment: only the file speaks
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", MANAGE_ENV)}
    argv = [
        "service",
        "webhook",
        "--webhook-port",
        str(port),
        "--cert-dir",
        str(cert_dir),
        "--config",
        str(config_file),
        *(["--kube-server", kube_server] if kube_server is not None else []),
    ]
    log = (tmp_path / "webhook.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kueue_es.cli", *argv, stdout=log, stderr=log, env=env
    )
    try:
        url = f"https://127.0.0.1:{port}"
        yield url, await ready(url, cert_dir, process, tmp_path / "webhook.log")
    finally:
        if process.returncode is None:
            process.terminate()
        await process.wait()
        log.close()


async def test_kueue_es_service_webhook_follows_config(tmp_path: Path) -> None:
    """The command as deployed answers a pod of a Configuration without ``pod`` as the no-op webhook does, and
    still suspends a queued Job and PyTorchJob."""
    async with command(tmp_path, configuration("batch/job", "kubeflow.org/pytorchjob")) as webhook:
        assert await answer(webhook, "mutate", queued_pod(), "pods") == ALLOWED
        assert await answer(webhook, "validate", queued_pod(**{webhooks.MANAGED_LABEL: "false"}), "pods") == ALLOWED
        job = sample_job(labels={QUEUE: "q"})
        assert patched(job, await answer(webhook, "mutate", job, "jobs"))["spec"]["suspend"] is True
        torch = pytorchjob("user-queue")
        assert patched(torch, await answer(webhook, "mutate", torch, "pytorchjobs"))["spec"]["runPolicy"] == {
            "suspend": True
        }


async def test_manage_jobs_without_queue_name_in_config_reaches_the_webhook(tmp_path: Path) -> None:
    """``manageJobsWithoutQueueName: true`` in the file, as the watcher reads it (no flag): a Job without the
    queue-name label is created suspended, as Kueue's webhook does with that option."""
    async with command(tmp_path, configuration() + "manageJobsWithoutQueueName: true\n") as webhook:
        job = sample_job()
        assert patched(job, await answer(webhook, "mutate", job, "jobs"))["spec"]["suspend"] is True


async def ready(url: str, cert_dir: Path, process: asyncio.subprocess.Process, log: Path) -> ssl.SSLContext:
    """Wait until the server answers ``/readyz`` (its CA is in ``cert_dir`` by then); fails with its log when
    it exits first."""
    async with aiohttp.ClientSession() as session:
        for _ in range(600):  # a bound on a slow start, not a timing the test depends on
            if process.returncode is not None:
                raise AssertionError(f"the webhook exited {process.returncode}:\n{log.read_text()}")
            with contextlib.suppress(aiohttp.ClientError, ssl.SSLError, OSError):  # not up yet
                trust = ssl.create_default_context(cafile=str(cert_dir / certs.CA_CERT))
                async with session.get(url + "/readyz", ssl=trust) as response:
                    if response.status == 200:
                        return trust
            await asyncio.sleep(0.1)
    raise AssertionError(f"the webhook did not become ready:\n{log.read_text()}")
