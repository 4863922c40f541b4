"""Fixtures for the Kubernetes edge: an emulated API server on a free port and a real client for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client
from kueue_es.sim import emulator


@pytest.fixture
async def cluster() -> AsyncIterator[emulator.ClusterEmulator]:
    """A ClusterEmulator served on 127.0.0.1 with fast bookmarks (0.2 s) for tests."""
    async with emulator.serve_emulator(bookmark_interval=0.2) as served:
        yield served


@pytest.fixture
async def api(cluster: emulator.ClusterEmulator) -> AsyncIterator[k8s_client.ApiClient]:
    """A kubernetes-asyncio ApiClient pointed at the emulator, closed after the test."""
    api_client = await client.make_api_client(server=str(cluster.url))
    try:
        yield api_client
    finally:
        await api_client.close()


@pytest.fixture(autouse=True)
async def no_leftover_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running (a watch loop, a Job run, a server handler)."""
    yield
    await asyncio.sleep(0.01)  # let cancelled tasks and closed connections finish
    leftovers = [task for task in asyncio.all_tasks() if task is not asyncio.current_task() and not task.done()]
    assert not leftovers, f"tasks left running after the test: {leftovers}"
