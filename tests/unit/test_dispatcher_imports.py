"""The dispatcher loads kubernetes-asyncio's client only when it reaches an API server.

That client imports every API and model class of Kubernetes (about 0.3 s on the CI machine); the bench's
dispatcher writes to a simulated API and never needs it, yet paid it at every start (a fifth of the
large-scale bench's start-up, counted in its wall). :func:`kueue_es.services.kube.client.make_api_client` imports
it, and :func:`kueue_es.services.dispatcher.kube_api.kube_api` asks for an ApiClient only once it is loaded.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kueue_es.services.dispatcher import kube_api
from kueue_es.services.kube import client as kube

PROBE = (
    "import sys, kueue_es.services.dispatcher.service, kueue_es.services.kube.client;"
    " print('kubernetes_asyncio.client' in sys.modules)"
)


def test_importing_the_dispatcher_leaves_the_kubernetes_client_unloaded() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


async def test_a_kubernetes_client_is_still_wrapped_and_anything_else_is_taken_as_it_is() -> None:
    api = await kube.make_api_client(server="http://127.0.0.1:1")
    try:
        wrapped = kube_api.kube_api(api)
        assert isinstance(wrapped, kube_api.KubeClient) and wrapped.client is api
    finally:
        await api.close()
    fake = object()
    assert kube_api.kube_api(fake) is fake  # type: ignore[arg-type]


async def test_an_api_error_is_still_told_apart_from_a_network_error() -> None:
    """With the library imported only where it is used, a refused connection is still a ConnectionFailedError."""
    api = await kube.make_api_client(server="http://127.0.0.1:1")
    try:
        with pytest.raises(kube.errors.ConnectionFailedError):
            await kube.get_object(api, kube.ref_for("batch/v1", "Job"), namespace="default", name="j")
    finally:
        await api.close()
