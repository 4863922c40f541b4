"""``kueue-es service webhook`` answers Kueue's webhooks of its own kinds as the emulated API server refuses.

Kueue ships ``mclusterqueue.kb.io``, ``mresourceflavor.kb.io`` (Default, CREATE), ``vclusterqueue.kb.io``,
``vcohort.kb.io`` and ``vresourceflavor.kb.io`` (CREATE, UPDATE) in config/components/webhook/manifests.yaml. Each
case of Kueue's test/integration/singlecluster/webhook/core/ (tests/kube/test_webhook_core.py ``CASES``) that its
CRD lets through is sent to the webhook service as kube-apiserver sends it (the object with its CRD's defaults)
and to the emulator: the service allows what the emulator stores and denies, with the same field errors, what
the emulator refuses 403 (the emulator's message is kube-apiserver's, ``admission webhook "<name>" denied the
request: `` and the webhook's message). What the CRD refuses (422) never reaches a webhook and is not sent.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import aiohttp.web
import jsonpatch
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es import validation
from kueue_es.services.kube import errors
from kueue_es.services.webhook import server
from kueue_es.sim import custom_resources
from tests.kube import test_webhook_core as core

FINALIZER = "kueue.x-k8s.io/resource-in-use"
PLURALS = {"ClusterQueue": "clusterqueues", "Cohort": "cohorts", "ResourceFlavor": "resourceflavors"}


def review(obj: dict[str, Any], *, operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    """An AdmissionReview v1 request of a cluster-scoped Kueue object, as kube-apiserver writes it."""
    kind = {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": obj["kind"]}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": {**kind, "resource": PLURALS[obj["kind"]]},
            "name": obj["metadata"]["name"],
            "operation": operation,
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }


def defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as kube-apiserver hands it to a webhook: with its CRD's defaults."""
    out = copy.deepcopy(obj)
    schema = validation.schema_of(out["kind"])
    assert schema is not None
    custom_resources.apply_defaults(out, schema)
    return out


@pytest.fixture
async def webhook() -> AsyncIterator[str]:
    """The webhook service's application on a free local HTTP port (TLS is the other tests' concern)."""
    runner = aiohttp.web.AppRunner(server.app())
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.post(url + path, json=body) as answer:
        assert answer.status == 200, await answer.text()
        response: dict[str, Any] = (await answer.json())["response"]
        assert response["uid"] == body["request"]["uid"]
        return response


WEBHOOK_CASES = [
    (name, obj, want) for name, obj, want in core.CASES if obj["kind"] in PLURALS and (want is None or want[0] == 403)
]


@pytest.mark.parametrize(("obj", "want"), [pytest.param(obj, want, id=name) for name, obj, want in WEBHOOK_CASES])
async def test_the_service_refuses_what_the_emulator_refuses(
    webhook: str, api: k8s_client.ApiClient, obj: dict[str, Any], want: tuple[int, list[tuple[str, str]]] | None
) -> None:
    """Kueue's create cases of its own kinds, at ``/validate-kueue-x-k8s-io-v1beta2-<kind>``: allowed when stored,
    else 403 Forbidden whose message is the emulator's after ``admission webhook "v<kind>.kb.io" denied the
    request: ``."""
    path = f"/validate-kueue-x-k8s-io-v1beta2-{obj['kind'].lower()}"
    response = await post(webhook, path, review(defaulted(obj)))
    if want is None:
        assert response == {"uid": response["uid"], "allowed": True}
        return
    with pytest.raises(errors.ApiError) as refusal:
        await core.create(api, obj)
    assert refusal.value.status == 403
    assert response["allowed"] is False
    assert response["status"]["code"] == 403 and response["status"]["reason"] == "Forbidden"
    prefix = f'admission webhook "v{obj["kind"].lower()}.kb.io" denied the request: '
    assert refusal.value.message == prefix + response["status"]["message"]


async def test_an_update_keeping_a_check_on_a_missing_flavor_is_allowed(webhook: str) -> None:
    """clusterqueue_webhook.go validateAdmissionCheckOnFlavorsUpdate (gate RejectUpdatesToCQWithInvalidOnFlavors
    off): a ClusterQueue whose check names a flavor it has no quota in is refused at create, an update that keeps
    its flavors and that check as they were is allowed, one that changes the check is refused."""
    path = "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"
    checks = {"admissionChecks": [{"name": "ac", "onFlavors": ["missing"]}]}
    old = defaulted(core.cq(core.group(core.quotas("x86", ("cpu", "1"))), admissionChecksStrategy=checks))
    field = "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]"
    response = await post(webhook, path, review(old))
    assert response["status"]["message"] == f'{field}: Unsupported value: "missing": supported values: "x86"'
    new = copy.deepcopy(old)
    new["spec"]["stopPolicy"] = "Hold"
    assert (await post(webhook, path, review(new, operation="UPDATE", old=old)))["allowed"] is True
    new["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] = ["other"]
    response = await post(webhook, path, review(new, operation="UPDATE", old=old))
    assert response["status"]["message"] == f'{field}: Unsupported value: "other": supported values: "x86"'


@pytest.mark.parametrize("kind", ["ClusterQueue", "ResourceFlavor"])
async def test_the_mutating_webhook_adds_kueues_finalizer(webhook: str, kind: str) -> None:
    """clusterqueue_webhook.go and resourceflavor_webhook.go Default: a created ClusterQueue or ResourceFlavor gets
    the ``resource-in-use`` finalizer (a JSONPatch keeping the others); one that has it gets no patch."""
    path = f"/mutate-kueue-x-k8s-io-v1beta2-{kind.lower()}"
    obj = defaulted(core.kueue(kind, "x", {}))
    obj["metadata"]["finalizers"] = ["example.com/mine"]
    response = await post(webhook, path, review(obj))
    assert response["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    assert patched["metadata"]["finalizers"] == ["example.com/mine", FINALIZER]
    assert {k: v for k, v in patched.items() if k != "metadata"} == {k: v for k, v in obj.items() if k != "metadata"}
    again = await post(webhook, path, review(patched))
    assert again == {"uid": again["uid"], "allowed": True}


async def test_there_is_no_mutating_cohort_webhook(webhook: str) -> None:
    """Kueue has no mcohort.kb.io (cohort_webhook.go has no Defaulter): the path is not served."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            webhook + "/mutate-kueue-x-k8s-io-v1beta2-cohort", json=review(core.kueue("Cohort", "c", {}))
        ) as answer,
    ):
        assert answer.status == 404
