"""The dashboard in a real browser: Debian's chromium, driven by playwright, against ``kueue-es demo --keep``.

The demo runs as a process (nats-server, the services, the emulated API server, the dashboard); the test
creates Jobs with the real ``kubectl``, as Kueue's quick start types it (``kubectl create -f
sample-job.yaml``), and watches the page change without reloading it. Assertions are on elements
(``data-testid``) and their text; screenshots are kept under the test's tmp_path (CI keeps them). One
test serves a recorded log instead (no demo) and checks a cohort's quota table against ``/api/overview``.

Chromium is Debian's (/usr/bin/chromium, installed by .ci/run), not one from ``playwright install``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000  # for the page to show what the log says (the services run on a loaded 2-core machine)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.timeout(420),
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: .ci/run installs Debian's chromium"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one"),
]

TOO_BIG = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: too-big
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 1
  completions: 1
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        command: ["/bin/sh", "-c", "sleep 60"]
        resources:
          requests:
            cpu: "20"
            memory: 200Mi
      restartPolicy: Never
"""


class Demo:
    """A running ``kueue-es demo --keep``: its run directory and the dashboard URL it printed."""

    def __init__(self, run_dir: Path, url: str) -> None:
        self.run_dir, self.url = run_dir, url

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """``kubectl ARGS`` against the demo's emulated API server; its stdout (fails the test on an error)."""
        kubeconfig = self.run_dir / "kubeconfig"
        done = subprocess.run(
            ["kubectl", f"--kubeconfig={kubeconfig}", f"--cache-dir={self.run_dir / 'kube-cache'}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """``kueue-es demo --keep --jobs 0`` (the quick-start objects, no Job of its own; Jobs run 600 s so an
    admitted one stays admitted) until it prints the dashboard's URL; stopped with SIGTERM after the test."""
    out = tmp_path / "demo.out"
    run_dir = tmp_path / "run"
    with out.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "kueue_es.cli", "demo", "--keep", "--jobs", "0", "--duration", "600"]
            + ["--dir", str(run_dir)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
        )
    try:
        deadline = time.monotonic() + 180
        url = None
        while url is None:
            assert process.poll() is None, f"the demo exited ({process.returncode}):\n{out.read_text()}"
            assert time.monotonic() < deadline, f"the demo printed no dashboard URL:\n{out.read_text()}"
            found = re.search(r"dashboard\s+(http://127\.0\.0\.1:\d+/)", out.read_text())
            url = found.group(1) if found else None
            time.sleep(0.5)
        yield Demo(run_dir, url)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_dashboard_follows_the_demo_live(demo: Demo, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = tmp_path / "screenshots"
    shots.mkdir()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(demo.url)
            testid = page.get_by_test_id

            # the quick-start ClusterQueue, its quota bars, its LocalQueue
            queue = page.locator('[data-testid="cluster-queue"][data-name="cluster-queue"]')
            expect(queue.get_by_test_id("cluster-queue-name")).to_have_text("cluster-queue", timeout=WAIT_MS)
            cpu = queue.get_by_test_id("usage-bar-cluster-queue-default-flavor-cpu")
            expect(cpu).to_have_attribute("data-nominal", "9000")
            expect(cpu).to_have_attribute("data-used", "0")
            expect(page.locator('[data-testid="local-queue"][data-name="default/user-queue"]')).to_be_visible()
            expect(testid("live-status")).to_have_text("live", timeout=WAIT_MS)
            page.screenshot(path=shots / "1-quick-start.png", full_page=True)

            # a Job created now appears and turns admitted, pushed to the page (it is never reloaded)
            page.evaluate("window.__notReloaded = true")
            sample = resources.files("kueue_es") / "demo_manifests" / "sample-job.yaml"
            created = demo.kubectl("create", "-f", str(sample))  # "job.batch/sample-job-xxxxx created"
            job = re.search(r"job\.batch/(\S+) created", created)
            assert job is not None, created
            row = page.locator(f'[data-testid="workload-row"][data-job="default/{job.group(1)}"]')
            expect(row).to_have_count(1, timeout=WAIT_MS)
            expect(row.get_by_test_id("workload-row-status")).to_have_text("ADMITTED", timeout=WAIT_MS)
            expect(cpu).to_have_attribute("data-used", "3000", timeout=WAIT_MS)  # 3 pods of 1 CPU
            assert page.evaluate("window.__notReloaded") is True
            page.screenshot(path=shots / "2-admitted.png", full_page=True)

            # a Job that cannot fit (20 CPU, the ClusterQueue has 9) waits: in its LocalQueue, and why
            demo.kubectl("create", "-f", "-", stdin=TOO_BIG)
            big = page.locator('[data-testid="workload-row"][data-job="default/too-big"]')
            expect(big.get_by_test_id("workload-row-status")).to_have_text("PENDING", timeout=WAIT_MS)
            expect(big.get_by_test_id("workload-row-reason")).to_contain_text("insufficient quota for cpu")
            pending = page.locator('[data-testid="local-queue"][data-name="default/user-queue"]')
            expect(pending.get_by_test_id("pending-workload")).to_contain_text("position 0 in LocalQueue")

            # the history slider: back to before the Jobs, the page shows none; live again, both
            slider = testid("history-slider")
            slider.evaluate("(s) => { s.value = '4'; s.dispatchEvent(new Event('input')); }")
            expect(testid("live-status")).to_have_text("history", timeout=WAIT_MS)
            expect(testid("as-of")).to_contain_text("as of #4 ", timeout=WAIT_MS)
            expect(page.get_by_test_id("workload-row")).to_have_count(0, timeout=WAIT_MS)
            page.screenshot(path=shots / "3-history.png", full_page=True)
            testid("history-live").click()
            expect(testid("live-status")).to_have_text("live", timeout=WAIT_MS)
            expect(page.get_by_test_id("workload-row")).to_have_count(2, timeout=WAIT_MS)

            # the workload page of the Job that cannot fit: its status, reason, position and story
            page.goto(f"{demo.url}workloads/default/too-big")
            expect(testid("workload-status")).to_have_text("pending", timeout=WAIT_MS)
            expect(testid("workload-title")).to_contain_text("Job too-big")
            expect(testid("workload-reason")).to_contain_text("insufficient quota for cpu in flavor default-flavor")
            expect(testid("workload-needs")).to_contain_text("never fits in flavor default-flavor of cluster-queue")
            expect(testid("workload-position")).to_contain_text("position 0 in LocalQueue default/user-queue")
            expect(testid("workload-story").get_by_test_id("story-line").first).to_contain_text("submitted")
            page.screenshot(path=shots / "4-too-big.png", full_page=True)
        finally:
            browser.close()
    assert sorted(p.name for p in shots.iterdir()) == [
        "1-quick-start.png",
        "2-admitted.png",
        "3-history.png",
        "4-too-big.png",
    ]


@contextlib.contextmanager
def serving(live: Any) -> Iterator[str]:
    """The dashboard over ``live`` (a :class:`kueue_es.dashboard.server.LiveLog`) on a free port, in a thread of
    its own (playwright's sync API runs outside an event loop); yields its URL."""
    import asyncio
    import threading

    from kueue_es.dashboard import server

    started: queue.Queue[str] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def run() -> None:
        async with server.serve(server.app(live), host="127.0.0.1", port=0) as url:
            started.put(url)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        yield started.get(timeout=60)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)


def test_the_page_shows_a_cohorts_figures_as_the_api_gives_them() -> None:
    """Cohort shared-pool (6 CPU of its own) lends 4 to its ClusterQueue team-c (0 CPU): the page's cohort table
    shows the API's figures, the cohort's own quota counted (tests/unit/test_dashboard.py checks the figures)."""
    import json
    import urllib.request

    from playwright.sync_api import expect, sync_playwright

    from kueue_es.dashboard import server
    from tests import builders as b
    from tests.unit.test_dashboard import Recorded, cohort
    from tests.unit.test_dashboard import queue as cluster_queue

    recorded = Recorded()
    recorded.facts(b.flavor("f"), cohort("shared-pool", cpu=6), cluster_queue("team-c", "shared-pool", cpu=0))
    recorded.facts(b.local_queue("lq", "team-c"), b.workload("w", cpu="4", created=1))
    recorded.settle()
    live = server.LiveLog()
    for message in recorded.log.messages:
        live.add(message)
    with serving(live) as url, sync_playwright() as playwright:
        with urllib.request.urlopen(f"{url}api/overview") as answer:
            [pool] = json.load(answer)["cohorts"]
        [cpu] = pool["quota"]
        assert (cpu["nominal"], cpu["ownLent"], cpu["borrowed"]) == (6000, 4000, 0)
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(url)
            shown = page.locator('[data-testid="cohort"][data-name="shared-pool"] > table [data-testid="quota-row"]')
            expect(shown).to_have_count(1, timeout=WAIT_MS)
            for key in ("nominal", "ownNominal", "used", "borrowed", "lent", "ownLent"):
                expect(shown).to_have_attribute(f"data-{key.lower()}", str(cpu[key]))
            cells = [cpu["display"][k] for k in ("nominal", "ownNominal", "used", "borrowed", "lent", "ownLent")]
            expect(shown.locator("td")).to_have_text(["f", "cpu", *cells])
            member = page.locator('[data-testid="cohort-member"][data-name="team-c"] [data-testid="quota-row"]')
            expect(member).to_have_attribute("data-borrowed", "4000")
        finally:
            browser.close()
