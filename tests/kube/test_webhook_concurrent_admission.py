"""Kueue's ClusterQueue webhook rules for ``spec.concurrentAdmissionPolicy`` (clusterqueue_webhook.go
validateConcurrentAdmissionPolicy), on the emulated API server as ``kueue-es demo --config`` plays them.

Found walking Kueue's "Setup Concurrent Admission" page with the gate on: a ClusterQueue with the policy and
StrictFIFO queueing was stored, where Kueue's webhook refuses it (403 Forbidden).
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import emulator

GATE_ON = {"ConcurrentAdmission": True}
DENIED = 'admission webhook "vclusterqueue.kb.io" denied the request: '


def _flavor(name: str) -> dict[str, Any]:
    return {"name": name, "resources": [{"name": "cpu", "nominalQuota": "4"}]}


def _cq(name: str, *, groups: int = 1, **spec: Any) -> dict[str, Any]:
    body = {
        "namespaceSelector": {},
        "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}},
        "resourceGroups": [
            {"coveredResources": [f"r{g}" if g else "cpu"], "flavors": [_flavor(f"f{g}")]} for g in range(groups)
        ],
        **spec,
    }
    for g, group in enumerate(body["resourceGroups"]):
        group["flavors"][0]["resources"][0]["name"] = group["coveredResources"][0]
        if g == 0:
            group["flavors"].append(_flavor("reservation"))
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


async def _create(gates: dict[str, bool], obj: dict[str, Any]) -> dict[str, Any]:
    async with emulator.serve_emulator(feature_gates=gates) as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            return await client.create_object(api, resources.CLUSTER_QUEUES, body=obj)
        finally:
            await api.close()


@pytest.mark.parametrize(
    ("spec", "wanted"),
    [
        pytest.param(
            {"queueingStrategy": "StrictFIFO"},
            'spec.queueingStrategy: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used when '
            "ConcurrentAdmissionPolicy is defined",
            id="strict-fifo",
        ),
        pytest.param(
            {"groups": 2},
            "spec.resourceGroups: Invalid value: 2: must have exactly one ResourceGroup when "
            "ConcurrentAdmissionPolicy is defined",
            id="two-resource-groups",
        ),
        pytest.param(
            {
                "concurrentAdmissionPolicy": {
                    "migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "gold"}}
                }
            },
            'spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName: Invalid value: "gold": '
            "must be one of the flavors defined in the ClusterQueue: [f0 reservation]",
            id="unknown-last-acceptable-flavor",
        ),
        pytest.param(
            {
                "concurrentAdmissionPolicy": {
                    "migration": {"mode": "RetainFirstAdmission", "constraints": {"lastAcceptableFlavorName": "f0"}}
                }
            },
            "spec.concurrentAdmissionPolicy.migration.constraints: Forbidden: may only be set when migration.mode is "
            '"TryPreferredFlavors" (got "RetainFirstAdmission")',
            id="constraints-without-try-preferred",
        ),
    ],
)
async def test_the_gate_on_refuses_what_kueues_webhook_refuses(spec: dict[str, Any], wanted: str) -> None:
    groups = spec.pop("groups", 1)
    with pytest.raises(errors.ApiError) as refusal:
        await _create(GATE_ON, _cq("cq", groups=groups, **spec))
    assert refusal.value.status == 403, refusal.value.body
    assert refusal.value.message == DENIED + wanted


async def test_a_valid_policy_and_the_gate_off_are_stored() -> None:
    """A policy within the rules is stored with the gate on; with the gate off (Kueue's default) the webhook
    checks nothing of the policy, so even StrictFIFO is stored."""
    valid = _cq(
        "valid",
        concurrentAdmissionPolicy={
            "migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "reservation"}}
        },
    )
    assert (await _create(GATE_ON, valid))["metadata"]["name"] == "valid"
    strict = _cq("strict", queueingStrategy="StrictFIFO")
    assert (await _create({}, strict))["metadata"]["name"] == "strict"


async def test_the_webhook_service_refuses_it_with_the_gate_on() -> None:
    """``kueue-es service webhook`` (its ``featureGates`` from the Configuration) answers
    ``/validate-kueue-x-k8s-io-v1beta2-clusterqueue`` with the same field errors, and allows it with the gate off."""
    import aiohttp
    import aiohttp.web

    from kueue_es.services.webhook import server
    from tests.kube import test_webhook_service_core as service

    obj = service.defaulted(_cq("cq", queueingStrategy="StrictFIFO"))
    path = "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"
    answers = []
    for gates in (GATE_ON, {}):
        runner = aiohttp.web.AppRunner(server.app(feature_gates=gates))
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            answers.append(await service.post(f"http://127.0.0.1:{port}", path, service.review(obj)))
        finally:
            await runner.cleanup()
    refused, allowed = answers
    assert refused["allowed"] is False and refused["status"]["code"] == 403
    assert refused["status"]["message"] == (
        'spec.queueingStrategy: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used when '
        "ConcurrentAdmissionPolicy is defined"
    )
    assert allowed["allowed"] is True
