"""API aggregation in the emulated API server (kueue_es/sim/aggregator.py): an APIService's group and
version are answered by its backend, as kube-apiserver's aggregator does, here the visibility server's
HTTPS application over a folded state; and the real kubectl reads it with ``get --raw`` and discovery."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import aiohttp
import pytest

from kueue_es.events.bus.server import free_ports
from kueue_es.services.visibility import server
from kueue_es.sim import aggregator, emulator
from tests.kube.test_kubectl import Kubectl
from tests.unit.test_visibility_api import _five

GROUP = "visibility.kueue.x-k8s.io"
CQ_PATH = f"/apis/{GROUP}/v1beta2/clusterqueues/cq/pendingworkloads"


def _free_port() -> int:
    """A port for a backend registered before it listens, below the ephemeral range (bus server.free_ports)."""
    return free_ports(1)[0]


async def _get(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(url) as answer:
        return answer.status, json.loads(await answer.read())


async def test_apiservice_group_is_proxied_to_its_backend(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    state = _five()
    port = _free_port()
    context = server.tls_context(cert_file=None, key_file=None, cert_dir=tmp_path / "cert")
    cluster.put_objects(aggregator.visibility_objects(host="127.0.0.1", port=port))
    status, body = await _get(cluster.url + CQ_PATH)
    assert status == 503 and body["reason"] == "ServiceUnavailable"  # registered, not listening yet
    async with server.serve_api(server.app(lambda: state), host="127.0.0.1", port=port, context=context):
        status, body = await _get(cluster.url + CQ_PATH + "?offset=1&limit=2")
        assert status == 200
        assert body["kind"] == "PendingWorkloadsSummary"
        assert [i["positionInClusterQueue"] for i in body["items"]] == [1, 2]
        status, body = await _get(cluster.url + f"/apis/{GROUP}/v1beta1/clusterqueues/none/pendingworkloads")
        assert status == 404 and body["details"] == {"name": "none", "group": GROUP, "kind": "clusterqueue"}
        status, body = await _get(cluster.url + f"/apis/{GROUP}/v1beta2")
        assert status == 200 and body["groupVersion"] == f"{GROUP}/v1beta2"
    status, groups = await _get(cluster.url + "/apis")
    listed = {g["name"]: g for g in groups["groups"]}
    assert [v["version"] for v in listed[GROUP]["versions"]] == ["v1beta2", "v1beta1"]
    assert "kueue.x-k8s.io" in listed  # the emulator's own groups stay
    status, group = await _get(cluster.url + f"/apis/{GROUP}")
    assert status == 200 and group["preferredVersion"]["version"] == "v1beta2"
    # a request for another group is the emulator's own, as before
    status, _ = await _get(cluster.url + "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    assert status == 200


async def test_backend_needs_endpoints(cluster: emulator.ClusterEmulator) -> None:
    objects = [o for o in aggregator.visibility_objects(host="127.0.0.1", port=1) if o["kind"] != "Endpoints"]
    cluster.put_objects(objects)
    status, body = await _get(cluster.url + CQ_PATH)
    assert status == 503
    assert body["message"] == 'service kueue-es/visibility-server: endpoints "visibility-server" not found'


@pytest.mark.timeout(120)
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_kubectl_get_raw_reads_the_visibility_api(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    state = _five()
    port = _free_port()
    context = server.tls_context(cert_file=None, key_file=None, cert_dir=tmp_path / "cert")
    cluster.put_objects(aggregator.visibility_objects(host="127.0.0.1", port=port))
    kubectl = Kubectl(cluster.url, tmp_path)
    async with server.serve_api(server.app(lambda: state), host="127.0.0.1", port=port, context=context):
        body = json.loads(await kubectl.ok("get", "--raw", CQ_PATH))
        assert [(i["metadata"]["name"], i["positionInClusterQueue"]) for i in body["items"]] == [
            ("b-high", 0),
            ("a-old", 1),
            ("b-old", 2),
            ("a-mid", 3),
            ("a-new", 4),
        ]
        local = json.loads(
            await kubectl.ok(
                "get", "--raw", f"/apis/{GROUP}/v1beta2/namespaces/default/localqueues/lq-b/pendingworkloads?limit=1"
            )
        )
        assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in local["items"]] == [("b-high", 0)]
        code, _, err = await kubectl.run("get", "--raw", f"/apis/{GROUP}/v1beta2/clusterqueues/nope/pendingworkloads")
        assert code != 0 and f'clusterqueue.{GROUP} "nope" not found' in err
        versions = await kubectl.ok("api-versions")
        assert f"{GROUP}/v1beta2" in versions.split() and f"{GROUP}/v1beta1" in versions.split()


def _echo_caller() -> aiohttp.web.Application:
    """A backend that answers with the front-proxy headers it got (``X-Remote-User``, every ``X-Remote-Group``)
    and whether any impersonation header reached it."""

    async def handle(request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response(
            {
                "user": request.headers.getall("X-Remote-User", []),
                "groups": request.headers.getall("X-Remote-Group", []),
                "impersonate": [h for h in request.headers if h.lower().startswith("impersonate-")],
            }
        )

    application = aiohttp.web.Application()
    application.router.add_route("*", "/{tail:.*}", handle)
    return application


async def test_the_backend_is_told_the_caller_the_api_server_authorized(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    """As kube-apiserver's aggregator (client-go SetAuthProxyHeaders): an impersonated request reaches the backend as
    the impersonated user and groups, one X-Remote-Group header each, without the Impersonate-* headers; a request
    that impersonates nobody as the administrator."""
    port = _free_port()
    context = server.tls_context(cert_file=None, key_file=None, cert_dir=tmp_path / "cert")
    cluster.put_objects(aggregator.visibility_objects(host="127.0.0.1", port=port))
    cluster.put_objects(
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "team-a-reads-everything"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team-a"}],
            }
        ]
    )
    impersonating = [("Impersonate-User", "alice"), ("Impersonate-Group", "team-a"), ("Impersonate-Group", "b")]
    async with (
        server.serve_api(_echo_caller(), host="127.0.0.1", port=port, context=context),
        aiohttp.ClientSession() as session,
    ):
        async with session.get(cluster.url + CQ_PATH, headers=impersonating) as answer:
            assert answer.status == 200
            assert await answer.json() == {
                "user": ["alice"],
                "groups": ["team-a", "b", "system:authenticated"],
                "impersonate": [],
            }
        async with session.get(cluster.url + CQ_PATH) as answer:
            assert await answer.json() == {
                "user": ["kubernetes-admin"],
                "groups": ["system:masters", "system:authenticated"],
                "impersonate": [],
            }
