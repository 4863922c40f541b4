"""``kueue-es up --kubeconfig PATH --context NAME`` against a cluster served over HTTP (the emulator).

The cluster is reached only through a written kubeconfig file, as a real one would
be; Kueue's quick-start objects and sample Job are applied to it and the Job must be
unsuspended and its Workload admitted. A cluster without the CRDs is refused with
a message that says how to install them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import pytest
import yaml

from kueue_es.events.bus import server
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SIM_DURATION_ANNOTATION
from kueue_es.supervisor import SERVICES
from tests.kube import examples

EXAMPLES = examples.EXAMPLES


def write_kubeconfig(path: Path, *, server: str) -> None:
    """Two contexts: the current one names a server nobody listens on, ``emulated`` the emulator."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "nowhere", "cluster": {"server": "http://127.0.0.1:9"}},
            {"name": "emulated", "cluster": {"server": server}},
        ],
        "users": [{"name": "someone", "user": {}}],
        "contexts": [
            {"name": "nowhere", "context": {"cluster": "nowhere", "user": "someone"}},
            {"name": "emulated", "context": {"cluster": "emulated", "user": "someone", "namespace": "default"}},
        ],
        "current-context": "nowhere",
    }
    path.write_text(yaml.safe_dump(config))


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports for an explicit ``--health-port`` block, below the kernel's
    ephemeral range (:func:`kueue_es.events.bus.server.free_ports`): a block inside it can be taken after the
    check by the source port of any outgoing connection (CI 34: the preemptor's port held by a connection for
    the whole run)."""
    return server.free_ports(count)[0]


async def start_up(*args: str, log: Path) -> asyncio.subprocess.Process:
    with log.open("wb") as sink:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kueue_es.cli", "up", *args, stdout=sink, stderr=sink
        )


async def until(check: Any, *, timeout: float, what: str, log: Path | None = None) -> Any:
    try:
        async with asyncio.timeout(timeout):
            while not (found := await check()):
                await asyncio.sleep(0.2)
            return found
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout}s\n{log.read_text() if log else ''}") from None


@pytest.mark.slow
async def test_up_runs_kueue_quick_start_on_a_cluster_through_a_kubeconfig(tmp_path: Path) -> None:
    async with serve_emulator() as emulator:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server=emulator.url)
        port = free_ports(len(SERVICES) + 6)  # up to the provisioning controller's health port, after the edge's
        out = tmp_path / "up.out"
        up = await start_up(
            "--kubeconfig", str(kubeconfig), "--context", "emulated", "--dir", str(tmp_path / "home"),
            "--health-port", str(port), "--leader-elect", log=out,
        )  # fmt: skip
        api = await kube.make_api_client(kubeconfig=kubeconfig, context="emulated")
        try:

            async def is_up() -> bool:
                assert up.returncode is None, out.read_text()
                return "kueue-es is up" in out.read_text()

            await until(is_up, timeout=60, what="kueue-es up", log=out)
            for doc in kube.read_manifests(EXAMPLES / "admin/single-clusterqueue-setup.yaml"):
                await kube.apply_manifest(api, doc)
            [sample] = kube.read_manifests(EXAMPLES / "jobs/sample-job.yaml")
            job = await kube.apply_manifest(api, sample)
            name = job["metadata"]["name"]
            assert job["spec"]["suspend"] is True  # the webhook's part, played by the emulator

            async def unsuspended() -> bool:
                stored = await kube.get_object(api, resources.JOBS, namespace="default", name=name)
                return stored["spec"].get("suspend") is False

            await until(unsuspended, timeout=60, what=f"Job {name} unsuspended", log=out)

            async def admitted() -> dict[str, Any] | None:
                workloads, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
                for wl in workloads:
                    conditions = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}
                    if conditions.get("Admitted") == "True":
                        return wl
                return None

            workload = await until(admitted, timeout=30, what="Workload admitted", log=out)
            assert workload["metadata"]["ownerReferences"][0]["name"] == name
            assert workload["status"]["admission"]["clusterQueue"] == "cluster-queue"

            async with aiohttp.ClientSession() as session:
                for offset, service in enumerate(SERVICES):

                    async def ready(url: str = f"http://127.0.0.1:{port + offset}/readyz") -> Any:
                        # "kueue-es is up" once every process started, not once each serves its health
                        # port: a service the admission did not need may still be importing (a loaded CI)
                        try:
                            async with session.get(url) as response:
                                return (response.status, json.loads(await response.text()))
                        except aiohttp.ClientConnectorError:
                            return None

                    status, body = await until(ready, timeout=30, what=f"{service} serves /readyz", log=out)
                    assert status == 200 and body["service"] == service, body
                    # the edges hold a Kubernetes Lease; a lone decider holds its NATS standby lease
                    assert body["role"] == ("leader" if service in ("watcher", "dispatcher") else "active")
                async with session.get(f"http://127.0.0.1:{port + SERVICES.index('dispatcher')}/metrics") as response:
                    metrics = await response.text()
            assert 'kueue_es_dispatch_writes_total{service="dispatcher"} 1.0' in metrics
            for service in ("watcher", "dispatcher"):
                lease = await kube.get_object(api, resources.LEASES, namespace="default", name=f"kueue-es-{service}")
                assert lease["spec"]["holderIdentity"]
        finally:
            await api.close()
            if up.returncode is None:
                up.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(up.wait(), timeout=30)
    text = out.read_text()
    assert code == 130, text
    assert "stopped: " + ", ".join(f"{service} 0" for service in SERVICES) in text
    assert "; restarting it in" not in text, text  # no service died and was restarted on the way
    assert (tmp_path / "home" / "nats").is_dir() and (tmp_path / "home" / "logs" / "dispatcher.log").is_file()


async def test_up_refuses_a_cluster_without_the_crds(tmp_path: Path) -> None:
    async with serve_emulator() as emulator:
        for plural in ("workloads", "cohorts"):
            del emulator.resources[kmock.resource("kueue.x-k8s.io", "v1beta2", plural)]
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server=emulator.url)
        out = tmp_path / "up.out"
        up = await start_up(
            "--kubeconfig", str(kubeconfig), "--context", "emulated", "--dir", str(tmp_path / "home"), log=out
        )
        code = await asyncio.wait_for(up.wait(), timeout=60)
    text = " ".join(out.read_text().split())
    assert code == 2, text
    assert "does not serve the CRDs cohorts.kueue.x-k8s.io, workloads.kueue.x-k8s.io" in text
    assert "kueue-es deploy crds | kubectl apply -f -" in text
    assert not (tmp_path / "home").exists()  # nothing was started


async def test_up_says_when_the_cluster_cannot_be_reached(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, server="http://127.0.0.1:9")
    out = tmp_path / "up.out"
    up = await start_up("--kubeconfig", str(kubeconfig), "--dir", str(tmp_path / "home"), log=out)
    code = await asyncio.wait_for(up.wait(), timeout=60)
    text = " ".join(out.read_text().split())
    assert code == 2, text
    assert f"cannot ask the cluster of {kubeconfig}" in text


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_up_runs_nats_with_a_user_per_service(tmp_path: Path) -> None:
    """Issue 13: ``up`` ran nats-server open to any local process; now every connection needs a user."""
    from kueue_es.events.bus import base, permissions
    from kueue_es.events.bus import nats as nats_bus
    from kueue_es.events.bus.server import Credentials

    home = tmp_path / "home"
    out = tmp_path / "up.out"
    port = free_ports(len(SERVICES) + 6)  # up to the provisioning controller's health port, after the edge's
    up = await start_up("--emulator", "--dir", str(home), "--health-port", str(port), log=out)
    try:

        async def all_ready() -> bool:  # each service connected to NATS as its own user
            assert up.returncode is None, out.read_text()
            if "kueue-es is up" not in out.read_text():
                return False
            async with aiohttp.ClientSession() as session:
                for offset in (*range(len(SERVICES)), len(SERVICES) + 3):  # and the publisher, PORT+8
                    try:
                        async with session.get(f"http://127.0.0.1:{port + offset}/readyz") as response:
                            if response.status != 200:
                                return False
                    except aiohttp.ClientError:
                        return False
            return True

        await until(all_ready, timeout=60, what="every service ready", log=out)
        text = " ".join(out.read_text().split())
        url = re.search(r"NATS (nats://127\.0\.0\.1:\d+)", text)
        assert url is not None, text
        creds = home / "creds"
        reader = Credentials(user="reader", password_file=creds / "reader.password")
        assert f"KUEUE_ES_NATS_USER=reader KUEUE_ES_NATS_PASSWORD_FILE={reader.password_file}" in text
        passwords = {user: (creds / f"{user}.password").read_text().strip() for user in permissions.USERS}
        assert all((creds / f"{user}.password").stat().st_mode & 0o077 == 0 for user in passwords)
        assert not any(password in text for password in passwords.values())
        for pid in Path("/proc").iterdir():  # no process shows a password in its arguments
            with contextlib.suppress(OSError):
                argv = (pid / "cmdline").read_bytes().decode(errors="replace")
                assert not any(password in argv for password in passwords.values()), argv
        with pytest.raises(base.BusError):
            await nats_bus.connect(url.group(1), timeout=0.5)
        bus = await nats_bus.connect(url.group(1), credentials=reader, timeout=0.5)
        try:
            assert await bus.last_seq() >= 0
            forged = base.OutgoingMessage(subject="kq.in.wl.ns.a", data=b"{}", msg_id="forged", headers={})
            with pytest.raises(base.BusError):
                await bus.publish(forged)
            await bus.check_stream(nats_bus.PUBLIC_STREAM_NAME)  # up made KQ_PUB, which reader may read
            with pytest.raises(base.BusError):
                await bus.publish_public(base.OutgoingMessage(subject="kq.pub.wl.ns.a", data=b"{}", msg_id="forged"))
        finally:
            await bus.close()
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(up.wait(), timeout=30)
    assert code == 130, out.read_text()
    assert "stopped: " + ", ".join(f"{service} 0" for service in SERVICES) in " ".join(out.read_text().split())


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_up_emulator_runs_the_demos_simulated_kubelet(tmp_path: Path) -> None:
    """``up --emulator`` runs the simulated kubelet the demo runs: an admitted Job runs ``--duration`` seconds
    (here 600: it is still running at the end) unless its ``kueue-es.dev/sim-duration-seconds`` annotation
    says otherwise (here 1: it completes, and its Workload finishes)."""
    home = tmp_path / "home"
    out = tmp_path / "up.out"
    up = await start_up("--emulator", "--duration", "600", "--dir", str(home), log=out)
    api: Any = None
    try:

        async def is_up() -> bool:
            assert up.returncode is None, out.read_text()
            return "kueue-es is up" in out.read_text()

        await until(is_up, timeout=90, what="kueue-es up", log=out)
        api = await kube.make_api_client(kubeconfig=home / "kubeconfig")
        for doc in kube.read_manifests(EXAMPLES / "admin/single-clusterqueue-setup.yaml"):
            await kube.apply_manifest(api, doc)
        [sample] = kube.read_manifests(EXAMPLES / "jobs/sample-job.yaml")
        short = {**sample, "metadata": {**sample["metadata"], "annotations": {SIM_DURATION_ANNOTATION: "1"}}}
        quick = (await kube.apply_manifest(api, short))["metadata"]["name"]
        slow = (await kube.apply_manifest(api, sample))["metadata"]["name"]

        async def conditions(ref: resources.ResourceRef, name: str) -> dict[str, str]:
            stored = await kube.get_object(api, ref, namespace="default", name=name)
            return {c["type"]: c["status"] for c in (stored.get("status") or {}).get("conditions") or []}

        async def workload_of(job: str) -> str | None:
            workloads, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            owned = [w for w in workloads if any(r["name"] == job for r in w["metadata"].get("ownerReferences", []))]
            return owned[0]["metadata"]["name"] if owned else None

        async def quick_finished() -> bool:
            if (await conditions(resources.JOBS, quick)).get("Complete") != "True":
                return False
            workload = await workload_of(quick)
            return workload is not None and (await conditions(resources.WORKLOADS, workload)).get("Finished") == "True"

        async def slow_running() -> dict[str, Any] | None:
            stored = await kube.get_object(api, resources.JOBS, namespace="default", name=slow)
            status = stored.get("status") or {}
            return stored if status.get("startTime") and status.get("active") == 3 else None

        await until(quick_finished, timeout=90, what=f"Job {quick} complete and its Workload finished", log=out)
        running = await until(slow_running, timeout=60, what=f"Job {slow} running", log=out)
        assert running["spec"]["suspend"] is False
        assert "Complete" not in await conditions(resources.JOBS, slow)
        assert (await kube.get_object(api, resources.JOBS, namespace="default", name=quick))["status"]["succeeded"] == 3
    finally:
        if api is not None:
            await api.close()
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(up.wait(), timeout=30)
    assert code == 130, out.read_text()


def child_pid(parent: int, needle: str) -> int:
    """The pid of ``parent``'s child process whose command line contains ``needle``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                return int(entry.name)
    raise AssertionError(f"no child of {parent} runs {needle!r}")


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """``kubectl --kubeconfig KUBECONFIG ARGS``'s stdout; fails the test on a non-zero exit."""
    process = await asyncio.create_subprocess_exec(
        "kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={kubeconfig.parent / 'kube-cache'}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_up_restarts_a_killed_admitter_and_nats_server_and_still_admits(tmp_path: Path) -> None:
    """Issue 15 point 1: a SIGKILL of the admitter, then of nats-server, under ``up --emulator``: each is
    restarted (nats-server on the same store and port), counted in the supervisor's metrics, and a Job
    created after each restart is admitted (through the real kubectl)."""
    home = tmp_path / "home"
    out = tmp_path / "up.out"
    port = free_ports(len(SERVICES) + 6)  # up to the provisioning controller's health port, after the edge's
    supervisor_url = f"http://127.0.0.1:{port + len(SERVICES)}"
    up = await start_up("--emulator", "--dir", str(home), "--health-port", str(port), log=out)
    kubeconfig = home / "kubeconfig"

    async def all_ready() -> bool:
        assert up.returncode is None, out.read_text()
        if "kueue-es is up" not in out.read_text():
            return False
        async with aiohttp.ClientSession() as session:
            for url in [f"http://127.0.0.1:{port + i}" for i in range(len(SERVICES))] + [supervisor_url]:
                try:
                    async with session.get(f"{url}/readyz") as response:
                        if response.status != 200:
                            return False
                except aiohttp.ClientError:
                    return False
        return True

    async def supervisor_metric(name: str, service: str) -> float:
        async with aiohttp.ClientSession() as session, session.get(f"{supervisor_url}/metrics") as response:
            text = await response.text()
        [value] = [line.split()[-1] for line in text.splitlines() if line.startswith(f'{name}{{service="{service}"}} ')]
        return float(value)

    async def create_job_and_wait_admitted(count: int) -> None:
        await kubectl(kubeconfig, "create", "-f", str(EXAMPLES / "jobs/sample-job.yaml"))

        async def admitted() -> bool:
            workloads = json.loads(await kubectl(kubeconfig, "get", "workloads", "-n", "default", "-o", "json"))
            return count == sum(
                any(
                    c["type"] == "Admitted" and c["status"] == "True"
                    for c in (wl.get("status") or {}).get("conditions") or []
                )
                for wl in workloads["items"]
            )

        await until(admitted, timeout=90, what=f"{count} Workloads admitted", log=out)

    try:
        await until(all_ready, timeout=90, what="every service ready", log=out)
        text = " ".join(out.read_text().split())
        assert f"supervisor {supervisor_url}" in text
        nats_url = re.search(r"NATS (nats://127\.0\.0\.1:\d+)", text)
        assert nats_url is not None, text
        await kubectl(kubeconfig, "apply", "-f", str(EXAMPLES / "admin/single-clusterqueue-setup.yaml"))
        await create_job_and_wait_admitted(1)

        admitter = child_pid(up.pid, "service admitter")
        os.kill(admitter, signal.SIGKILL)

        async def admitter_back() -> bool:
            return "admitter restarted" in out.read_text() and await all_ready()

        await until(admitter_back, timeout=60, what="admitter restarted", log=out)
        text = " ".join(out.read_text().split())
        assert (
            f"admitter killed by SIGKILL; restarting it in 1s (attempt 1); log {home / 'logs' / 'admitter.log'}" in text
        )
        assert child_pid(up.pid, "service admitter") != admitter
        assert await supervisor_metric("kueue_es_service_restarts_total", "admitter") == 1.0
        assert await supervisor_metric("kueue_es_service_up", "admitter") == 1.0
        await create_job_and_wait_admitted(2)

        nats = child_pid(up.pid, "nats-server")
        os.kill(nats, signal.SIGKILL)

        async def nats_back() -> bool:
            return "nats-server restarted" in out.read_text() and await all_ready()

        await until(nats_back, timeout=60, what="nats-server restarted", log=out)
        assert child_pid(up.pid, "nats-server") != nats
        assert await supervisor_metric("kueue_es_service_restarts_total", "nats-server") == 1.0
        log_text = (home / "nats" / "nats-server.log").read_text()
        port_line = f"Listening for client connections on {nats_url.group(1).removeprefix('nats://')}"
        assert log_text.count(port_line) == 2, log_text[-2000:]  # the same port, the same log
        await create_job_and_wait_admitted(3)
        assert up.returncode is None
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(up.wait(), timeout=30)
    text = " ".join(out.read_text().split())
    assert code == 130, text
    assert "stopped: " + ", ".join(f"{service} 0" for service in SERVICES) in text
    assert '"event": "service_restarted"' in (home / "logs" / "up.log").read_text()


@pytest.mark.slow
async def test_up_gives_up_on_a_crash_loop_naming_the_service_and_its_log(tmp_path: Path) -> None:
    """More than ``--crash-loop-restarts`` exits of one service within the window: ``up`` stops and exits 1."""
    home = tmp_path / "home"
    out = tmp_path / "up.out"
    up = await start_up("--emulator", "--dir", str(home), "--crash-loop-restarts", "1", log=out)
    try:

        async def started() -> bool:
            assert up.returncode is None, out.read_text()
            return "kueue-es is up" in out.read_text()

        await until(started, timeout=90, what="kueue-es up", log=out)
        first = child_pid(up.pid, "service admitter")
        os.kill(first, signal.SIGKILL)

        async def restarted() -> int | None:
            if "admitter restarted" not in out.read_text():
                return None
            return child_pid(up.pid, "service admitter")

        second = await until(restarted, timeout=60, what="admitter restarted", log=out)
        assert second != first
        os.kill(second, signal.SIGKILL)
        code = await asyncio.wait_for(up.wait(), timeout=60)
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
            await asyncio.wait_for(up.wait(), timeout=30)
    text = " ".join(out.read_text().split())
    log = home / "logs" / "admitter.log"
    assert code == 1, text
    assert f"error: admitter is in a crash loop: 2 exits within 120s, the last killed by SIGKILL; see {log}" in text
    assert f"last lines of {log}:" in text or f"{log} is empty" in text
    stopped = re.search(r"stopped: watcher -?\d+, admitter (-?\d+), preemptor", text)  # the others may be
    assert stopped is not None and stopped.group(1) == "-9", text  # SIGTERMed while still importing: -15


def run_dir_files(home: Path) -> dict[str, bytes]:
    """What a second ``up`` used to rewrite in a running one's directory: the passwords and the kubeconfig."""
    files = {path.name: path.read_bytes() for path in sorted((home / "creds").glob("*.password"))}
    return files | {"kubeconfig": (home / "kubeconfig").read_bytes()}


async def wait_up(up: asyncio.subprocess.Process, out: Path) -> None:
    async def started() -> bool:
        assert up.returncode is None, out.read_text()
        return "kueue-es is up" in out.read_text()

    await until(started, timeout=90, what="kueue-es up", log=out)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_second_up_or_demo_on_a_running_dir_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """Ops trial: a second ``up`` on a running one's --dir rewrote every password and the kubeconfig before
    it was refused (or, without --health-port, ran a second nats-server on the same store), and the first
    crash-looped on ``Authorization Violation``. Now the directory's lock refuses it before it writes."""
    home = tmp_path / "home"
    out = tmp_path / "up.out"
    port = free_ports(len(SERVICES) + 6)
    up = await start_up("--emulator", "--dir", str(home), "--health-port", str(port), log=out)
    try:
        await wait_up(up, out)
        before = run_dir_files(home)
        assert len(before) > 2
        for second in (
            ["up", "--emulator", "--dir", str(home), "--health-port", str(port)],  # its ports taken too
            ["up", "--emulator", "--dir", str(home)],  # nothing else would stop it
            ["demo", "--jobs", "0", "--dir", str(home)],
        ):
            other = tmp_path / "second.out"
            with other.open("wb") as sink:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "kueue_es.cli", *second, stdout=sink, stderr=sink
                )
            code = await asyncio.wait_for(process.wait(), timeout=60)
            text = " ".join(other.read_text().split())
            assert run_dir_files(home) == before, second  # byte for byte: kubectl and the services go on
            assert code == 2, (second, text)
            assert f"error: {home} is in use by process {up.pid}" in text, text
            assert "kueue-es is up" not in text and "emulated cluster" not in text, text
        assert up.returncode is None, out.read_text()
        assert "; restarting it in" not in out.read_text()
        assert (home / "run.lock").read_text().strip() == str(up.pid)
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(up.wait(), timeout=60)
    assert code == 130, out.read_text()


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_up_takes_over_a_dir_whose_holder_was_killed(tmp_path: Path) -> None:
    """A SIGKILLed ``up`` leaves no stale lock: the kernel drops it with the process (and its children
    die with it), so ``up`` again on the directory starts and resumes the log."""
    home = tmp_path / "home"
    out = tmp_path / "up.out"
    first = await start_up("--emulator", "--dir", str(home), log=out)
    try:
        await wait_up(first, out)
    finally:
        first.kill()
        await asyncio.wait_for(first.wait(), timeout=30)
    assert (home / "run.lock").read_text().strip() == str(first.pid)  # its PID still written: no matter
    again = tmp_path / "again.out"
    up = await start_up("--emulator", "--dir", str(home), log=again)
    try:
        await wait_up(up, again)
        assert (home / "run.lock").read_text().strip() == str(up.pid)
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(up.wait(), timeout=60)
    text = " ".join(again.read_text().split())
    assert code == 130, text
    assert "in use by" not in text
