"""``kueue-es explain``, ``list`` and ``status`` against a running nats-server (``--nats``): read in Direct Get
batches, started from a verified snapshot when ``--at`` allows it, and from the oldest snapshot of a
purged log. The log is the recorded preemption demo (tests/fixtures/logs/demo-preempt.jsonl)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kueue_es import cli, current, logsource, snapshots
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import server
from tests.bus.test_snapshots import SETTLED, _fresh, _publish_on, golden, split_point

URGENT = "default/job-urgent-job-zslf2-67365"


@pytest.fixture(scope="module")
def plain_server() -> Iterator[server.NatsServer]:
    with server.NatsServer() as running:
        yield running


@pytest.fixture
async def bus(plain_server: server.NatsServer) -> AsyncIterator[nats_bus.NatsBus]:
    await _fresh(plain_server.url)
    opened = await nats_bus.connect(plain_server.url)
    await opened.ensure_snapshot_bucket()
    try:
        yield opened
    finally:
        await opened.close()


async def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # the set-up's log lines
    code = await asyncio.to_thread(cli.main, list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_list_starts_from_a_snapshot_explain_from_the_start_then_from_a_purged_logs_snapshot(
    bus: nats_bus.NatsBus, plain_server: server.NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = plain_server.url
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])

    code, out, err = await _run(capsys, "list", "workload", "--nats", url, "-o", "json")
    assert code == 0 and f"folded from snapshot {snapshots.object_name(cut)} (#{cut})" in err
    whole = json.loads(out)
    assert {row["STATUS"] for row in whole} == {"FINISHED"} and len(whole) == 5
    code, out, err = await _run(capsys, "list", "workload", "--nats", url, "--at", str(cut - 1), "-o", "json")
    assert code == 0 and "snapshot" not in err  # before the snapshot: folded from #1
    assert {row["STATUS"] for row in json.loads(out)} != {"FINISHED"}

    code, out, err = await _run(capsys, "explain", "default/urgent-job-zslf2", "--nats", url, "-o", "json")
    assert code == 0 and err == ""
    story = json.loads(out)
    assert story["workload"] == URGENT and story["story"][0]["what"] == "submitted"
    assert story["asOf"]["seq"] == len(messages)

    kept = await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    assert kept.first_seq == cut
    code, out, err = await _run(capsys, "status", "--nats", url, "-o", "json")
    assert code == 0 and f"#{cut}" in err
    code, out, err = await _run(capsys, "explain", "default/urgent-job-zslf2", "--nats", url, "-o", "json")
    assert code == 0 and f"the log starts at #{cut}" in err
    assert json.loads(out)["status"] == "finished"
    code, _, err = await _run(capsys, "status", "--nats", url, "--at", "3")
    assert code == 2 and f"before the log's first sequence #{cut}" in err


async def test_with_several_running_each_reader_says_on_stderr_which_it_read_and_names_the_others(
    bus: nats_bus.NatsBus,
    plain_server: server.NatsServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Two systems recorded as running (``demo --keep`` twice): bare ``status``, ``list`` and ``explain``
    (and ``what-if``) read the newest and say so on stderr, naming the other with its NATS URL (to give to --nats), as
    ``replay`` does; stdout stays the answer (``-o json`` is JSON). With one running, nothing is said."""
    monkeypatch.setenv(current.STATE_ENV, str(tmp_path / "state"))
    for name in (current.FILE_ENV, current.URL_ENV, nats_bus.USER_ENV, nats_bus.PASSWORD_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    await _publish_on(bus, golden())
    other = subprocess.Popen(["sleep", "600"])  # a process that runs: the older system's recorder
    try:
        systems = tmp_path / "state" / "systems"
        systems.mkdir(parents=True)
        older = {"natsUrl": "nats://127.0.0.1:1", "command": "demo", "pid": other.pid, "recordedAt": time.time() - 60}
        (systems / f"{other.pid}.json").write_text(json.dumps(older))
        current.record(nats_url=plain_server.url, reader=None, kubeconfig=None, run_dir=tmp_path, command="demo")
        try:
            for argv in (
                ("status", "-o", "json"),
                ("list", "workload", "-A", "-o", "json"),
                ("explain", "default/urgent-job-zslf2", "-o", "json"),
            ):
                code, out, err = await _run(capsys, *argv)
                assert code == 0, (argv, err)
                json.loads(out)  # the note is not on stdout
                assert f"reading the log at {plain_server.url}" in err, argv
                assert f"demo pid {os.getpid()}" in err and f"demo pid {other.pid} at nats://127.0.0.1:1" in err, argv
            changes = tmp_path / "changes.yaml"
            changes.write_text(
                "apiVersion: whatif.kueue-es.io/v1\nkind: WorkloadPriorities\npriorities: {default/urgent-job-zslf2: 5}\n"
            )
            code, out, err = await _run(capsys, "what-if", "-f", str(changes))
            assert code == 0, err
            assert f"reading the log at {plain_server.url}" in err and "reading the log" not in out
            assert f"demo pid {other.pid} at nats://127.0.0.1:1" in err
        finally:
            current.forget()
    finally:
        other.kill()
        other.wait()
    current.record(nats_url=plain_server.url, reader=None, kubeconfig=None, run_dir=tmp_path, command="demo")
    try:
        code, out, err = await _run(capsys, "status", "-o", "json")
        assert code == 0 and json.loads(out) and "reading the log" not in err  # one running: nothing to say
    finally:
        current.forget()


async def test_kubectl_kueue_reads_the_log_of_the_system_of_the_kubeconfig_in_use(
    bus: nats_bus.NatsBus,
    plain_server: server.NatsServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Two systems running: this cluster's (an older demo, its log on ``plain_server``, kubeconfig A) and
    another user's newer one (kubeconfig B, its log elsewhere). ``kubectl kueue explain`` and ``list --at``
    with ``$KUBECONFIG`` A, or ``--kubeconfig A``, read A's log, as ``list workload``'s POSITION IN QUEUE
    does; they read the newest before. A kubeconfig of neither is refused, naming both."""
    from kueue_es.kueuectl import cli as kueuectl

    monkeypatch.setenv(current.STATE_ENV, str(tmp_path / "state"))
    for name in (current.FILE_ENV, current.URL_ENV, nats_bus.USER_ENV, nats_bus.PASSWORD_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    await _publish_on(bus, golden())
    mine, theirs, stray = tmp_path / "a" / "kubeconfig", tmp_path / "b" / "kubeconfig", tmp_path / "kubeconfig"
    for path in (mine, theirs, stray):
        path.parent.mkdir(exist_ok=True)
        path.write_text("apiVersion: v1\nkind: Config\n")
    other = subprocess.Popen(["sleep", "600"])  # the process that recorded this cluster's (older) system
    try:
        systems = tmp_path / "state" / "systems"
        systems.mkdir(parents=True)
        older = {
            "natsUrl": plain_server.url,
            "kubeconfig": str(mine),
            "command": "demo",
            "pid": other.pid,
            "recordedAt": time.time() - 60,
        }
        (systems / f"{other.pid}.json").write_text(json.dumps(older))
        current.record(nats_url="nats://127.0.0.1:1", reader=None, kubeconfig=theirs, run_dir=tmp_path, command="demo")
        try:

            async def kubectl_kueue(*argv: str) -> tuple[int, str, str]:
                capsys.readouterr()
                code = await asyncio.to_thread(kueuectl.main, list(argv))
                captured = capsys.readouterr()
                return code, captured.out, captured.err

            monkeypatch.setenv("KUBECONFIG", str(mine))
            code, out, err = await kubectl_kueue("explain", "urgent-job-zslf2", "-o", "json")
            assert code == 0, err
            assert json.loads(out)["workload"] == URGENT
            assert f"reading the log at {plain_server.url} (demo pid {other.pid}" in err and str(mine) in err
            code, out, err = await kubectl_kueue("list", "workload", "-A", "--at", "5", "-o", "json")
            assert code == 0, err
            assert isinstance(json.loads(out), list)

            monkeypatch.setenv("KUBECONFIG", str(theirs))  # the flag wins over the variable, as kubectl's
            code, out, err = await kubectl_kueue("--kubeconfig", str(mine), "status", "-o", "json")
            assert code == 0, err
            assert [q["name"] for q in json.loads(out)["clusterQueues"]]

            monkeypatch.setenv("KUBECONFIG", str(stray))
            code, out, err = await kubectl_kueue("explain", "urgent-job-zslf2")
            assert code == 2 and out == ""
            assert f"no running kueue-es is the cluster of the kubeconfig in use ({stray}, from $KUBECONFIG)" in err
            assert str(mine) in err and str(theirs) in err
            code, out, err = await kubectl_kueue("explain", "urgent-job-zslf2", "--nats", plain_server.url)
            assert code == 0, err  # a log named outright is read whatever the kubeconfig
        finally:
            current.forget()
    finally:
        other.kill()
        other.wait()


async def test_at_a_time_before_the_logs_first_message_says_so(
    bus: nats_bus.NatsBus, plain_server: server.NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every message of a running system's log has a time (its own or when it was stored): a time before the
    first one folds nothing, and each reader says why it finds nothing."""
    await _publish_on(bus, golden())
    first = (await bus.get(1)).time_ms
    assert first
    for argv in (("explain", URGENT), ("list", "workload", "-A"), ("status",)):
        code, _, err = await _run(capsys, *argv, "--nats", plain_server.url, "--at", "2001-01-01T00:00:00Z")
        assert (
            "note: --at 2001-01-01T00:00:00Z is before the log's first message (#1 at "
            f"{logsource.rfc3339(first)}): nothing of the log is folded"
        ) in err, (argv, err)
