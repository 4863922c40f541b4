"""Issue 19's done-when for KQ_PUB: a subscriber that follows docs/ alone receives live admissions on the demo.

``kueue-es demo --keep`` runs as its own process; docs/examples/subscriber.py runs as another, as a user
runs it (its own NATS connection as ``reader``, the AsyncAPI document from ``kueue-es events asyncapi``),
reading KQ_PUB from its start: it validates every message against the document's schemas and every
decision against its record, and prints each admission. A Job submitted while it runs must reach it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from kueue_es import cli
from kueue_es.demo import demo_manifests
from kueue_es.services.kube import client as kube

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ADMITTED = re.compile(
    r"^admitted (\S+) in cluster-queue flavors (\{.*\}) \(#\d+, verified by record #\d+ \S+, at \S+\)$"
)


async def wait_for(path: Path, pattern: str, *, process: asyncio.subprocess.Process, timeout: float) -> re.Match[str]:
    async with asyncio.timeout(timeout):
        while True:
            found = re.search(pattern, path.read_text() if path.exists() else "")
            if found:
                return found
            assert process.returncode is None, f"exited {process.returncode}:\n{path.read_text()}"
            await asyncio.sleep(0.2)


@pytest.mark.timeout(400)
async def test_the_example_subscriber_receives_live_verified_admissions(tmp_path: Path) -> None:
    run_dir, demo_out, sub_out = tmp_path / "demo", tmp_path / "demo.out", tmp_path / "subscriber.out"
    with demo_out.open("wb") as sink:
        demo = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kueue_es", "demo", "--keep", "--jobs", "2", "--duration", "1", "--dir", str(run_dir),
            stdout=sink, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"},
        )  # fmt: skip
    subscriber = None
    try:
        found = await wait_for(demo_out, r"NATS\s+(nats://127\.0\.0\.1:\d+)", process=demo, timeout=180)
        await wait_for(demo_out, r"Still running", process=demo, timeout=60)
        nats_url = found.group(1)
        document = tmp_path / "asyncapi.json"
        assert cli.main(["events", "asyncapi", "--output", str(document)]) == 0
        with sub_out.open("wb") as sink:
            subscriber = await asyncio.create_subprocess_exec(
                sys.executable, str(ROOT / "docs" / "examples" / "subscriber.py"), "--nats", nats_url,
                "--user", "reader", "--password-file", str(run_dir / "creds" / "reader.password"),
                "--asyncapi", str(document), "--admissions", "3", "--timeout", "150",
                stdout=sink, stderr=asyncio.subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        # the demo's two Jobs, from KQ_PUB's start
        await wait_for(sub_out, r"(?s)admitted .*\n.*admitted ", process=subscriber, timeout=90)
        api = await kube.make_api_client(kubeconfig=str(run_dir / "kubeconfig"))
        try:
            _, job = demo_manifests()
            created = await kube.apply_manifest(api, job)  # live: submitted while the subscriber reads
        finally:
            await api.close()
        async with asyncio.timeout(120):
            code = await subscriber.wait()
        lines = sub_out.read_text().splitlines()
        assert code == 0, "\n".join(lines)
        admissions = [m for line in lines if (m := ADMITTED.match(line))]
        assert len(admissions) == 3, lines
        assert admissions[-1].group(1).startswith(f"default/job-{created['metadata']['name']}-")
        for match in admissions:
            assert match.group(2) == '{"cpu": "default-flavor", "memory": "default-flavor"}'
        assert not any(line.startswith(("INVALID", "TIMEOUT")) for line in lines)
    finally:
        for process in (subscriber, demo):
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    if process is demo:
                        os.killpg(process.pid, signal.SIGTERM)
                    else:
                        process.terminate()
                try:
                    async with asyncio.timeout(60):
                        await process.wait()
                except TimeoutError:
                    process.kill()
                    await process.wait()
