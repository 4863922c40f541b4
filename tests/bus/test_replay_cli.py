"""``kueue-es replay --store DIR``: the exit codes and what is printed, on a real nats-server.

Each case writes the recorded preemption demo (tests/fixtures/logs/demo-preempt.jsonl),
changed in one way, into a fresh store, stops the server, and runs the command.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import msgspec
import nats
import pytest

from kueue_es import deciders
from kueue_es.cli import main
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.server import LocalAuth, NatsServer
from kueue_es.services.runtime import build_batch
from tests.unit.test_golden_log import _load


async def _write(store: Path, messages: list[LogMessage], *, auth: LocalAuth | None = None) -> None:
    async with NatsServer(store_dir=store, auth=auth) as server:
        admin = auth.credentials("admin") if auth is not None else None
        bus = await nats_bus.connect(server.url, credentials=admin)
        await bus.close()
        login = {"user": admin.user, "password": admin.password()} if admin is not None else {}
        nc = await nats.connect(server.url, **login)
        try:
            js = nc.jetstream()
            for message in messages:
                ack = await js.publish(message.subject, message.data, headers=dict(message.headers))
                assert ack.seq == message.seq
        finally:
            await nc.close()


def make_store(tmp_path: Path, messages: list[LogMessage], *, auth: LocalAuth | None = None) -> Path:
    """A stopped system's store directory holding exactly ``messages`` (sequences 1..n);
    with ``auth``, written as ``kueue-es up`` and ``demo`` write it: by users of the KQ account."""
    store = tmp_path / "store"
    asyncio.run(_write(store, messages, auth=auth))
    return store


def golden() -> list[LogMessage]:
    return _load("demo-preempt.jsonl")


def first_record(messages: list[LogMessage]) -> tuple[int, types.DecisionRecord]:
    for message in messages:
        event = codec.decode(message.data)
        if isinstance(event, types.DecisionRecord) and event.role == deciders.ADMITTER.role:
            return message.seq, event
    raise AssertionError("no admitter record")


def test_an_untouched_log_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, golden())
    assert main(["replay", "--store", str(store)]) == 0
    out = capsys.readouterr()
    assert "22 decisions: 22 matched, 0 differed, 0 not re-checked" in out.out
    assert "every decision matched; the log is complete" in out.out
    assert out.err == ""  # no progress bar when stderr is not a terminal


def test_a_store_written_with_users_replays_without_their_passwords(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stopped demo's or up's store (its log in the KQ account, its passwords gone with the
    run) replays: served read-only, connections without credentials act as the reader."""
    store = make_store(tmp_path, golden(), auth=LocalAuth.create(tmp_path / "run-creds"))
    assert (store / "jetstream" / "KQ").is_dir()
    assert main(["replay", "--store", str(store)]) == 0
    assert "every decision matched; the log is complete" in capsys.readouterr().out
    assert main(["replay", "--store", str(store), "--from", "1", "--to", "40"]) == 0


def test_a_difference_exits_1_with_a_field_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = golden()
    victim = next(m for m in messages if m.headers.get("Kq-Type") == "QuotaReserved")
    messages[victim.seq - 1] = msgspec.structs.replace(
        victim, data=victim.data.replace(b'"cluster-queue"', b'"cluster-queuf"', 1)
    )
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store), "--max-diffs", "1"]) == 1
    out = capsys.readouterr().out
    assert f"at #{victim.seq}" in out
    assert 'clusterQueue: "cluster-queuf" -> "cluster-queue"' in out
    assert "difference 2:" not in out


def test_a_record_of_another_logic_version_exits_3_naming_the_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    messages = golden()
    seq, record = first_record(messages)
    older = msgspec.structs.replace(record, logic_version=record.logic_version - 1, kueue_es_version="0.0.9")
    messages[seq - 1] = msgspec.structs.replace(messages[seq - 1], data=codec.encode(older))
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store)]) == 3
    out = capsys.readouterr().out
    assert "made by kueue-es 0.0.9: pip install kueue-es==0.0.9" in out
    assert "every decision matched" not in out


def test_an_orphan_decision_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = types.QuotaReserved(
        workload=types.WorkloadRef(namespace="default", name="intruder"),
        cluster_queue="cluster-queue",
        pod_set_assignments=[],
        at_ms=1,
    )
    outgoing = subjects.message(forged, subject="kq.dec.p0.wl.default.intruder", msg_id="admit:p0:999:1")
    messages = golden()
    messages.append(
        LogMessage(
            seq=88,
            subject=outgoing.subject,
            data=outgoing.data,
            headers={**outgoing.headers, "Nats-Msg-Id": outgoing.msg_id},
        )
    )
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store)]) == 4
    assert "orphan: #88 QuotaReserved on kq.dec.p0.wl.default.intruder" in capsys.readouterr().out


def _forged_preemptor_batch(schema_version: int) -> list[LogMessage]:
    """The golden log, then a well-formed batch on the preemptor's head (as an admin could publish it) carrying a
    QuotaReserved, in ``schema_version``'s layout: record and output message (16) or one record carrying it (17)."""
    messages = golden()
    forged = types.QuotaReserved(
        workload=types.WorkloadRef(namespace="default", name="intruder"),
        cluster_queue="cluster-queue",
        pod_set_assignments=[],
        at_ms=1,
    )
    head, rest = build_batch(
        deciders.PREEMPTOR, outputs=[forged], basis_seq=87, head_seq=0, now_ms=1, schema_version=schema_version
    )
    for seq, out in enumerate((head, *rest), start=88):
        messages.append(
            LogMessage(seq=seq, subject=out.subject, data=out.data, headers={**out.headers, "Nats-Msg-Id": out.msg_id})
        )
    return messages


def test_a_batch_of_decisions_its_role_does_not_make_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A well-formed batch on the preemptor's head (as an admin could publish it) carrying a QuotaReserved:
    the services fold none of it, and replay reports it as orphans, also in --jobs mode."""
    messages = _forged_preemptor_batch(16)
    assert len(messages) == 89
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store)]) == 4
    out = capsys.readouterr().out
    assert "orphan: #88 DecisionRecord on kq.dec.p0.head.preemptor: wrong_role: batch preempt:p0:87" in out
    assert "orphan: #89 QuotaReserved on kq.dec.p0.wl.default.intruder: wrong_role" in out
    assert "which role 'preempt' does not make" in out
    assert main(["replay", "--store", str(store), "--jobs", "2", "--checkpoints", str(tmp_path / "cp")]) != 0


def test_a_record_carrying_decisions_its_role_does_not_make_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same forgery in event schema 17: the preemptor's record carries the QuotaReserved itself; replay
    reports the record an orphan naming the decision, also in --jobs mode."""
    messages = _forged_preemptor_batch(17)
    assert len(messages) == 88  # no output message
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store)]) == 4
    out = capsys.readouterr().out
    assert "orphan: #88 DecisionRecord on kq.dec.p0.head.preemptor: wrong_role" in out
    assert "decision 1 is a QuotaReserved, which role 'preempt' does not make" in out
    assert main(["replay", "--store", str(store), "--jobs", "2", "--checkpoints", str(tmp_path / "cp")]) != 0


def test_a_log_of_the_single_head_layout_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kueue-es before per-role heads put every record on kq.dec.<p>.head: replay says so, exit 2."""
    messages = [
        msgspec.structs.replace(m, subject="kq.dec.p0.head") if subjects.head_token(m.subject) else m for m in golden()
    ]
    store = make_store(tmp_path, messages)
    assert main(["replay", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "error: the log has a DecisionRecord on kq.dec.p0.head (#" in err
    assert "kq.dec.*.head" in err and "kq.dec.*.head.*" in err


def test_progress_on_request_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, golden())
    assert main(["replay", "--store", str(store), "--progress"]) == 0
    out = capsys.readouterr()
    assert "re-checking" in out.err and "events/s" in out.err
    assert "re-checking" not in out.out


async def test_replay_without_a_user_is_refused_with_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Against a server with users (as up and demo start it), replay without credentials says
    so in one line and a hint, exit 2, not a traceback."""
    auth = LocalAuth.create(tmp_path / "creds")
    async with NatsServer(auth=auth) as server:
        code = await asyncio.to_thread(main, ["replay", "--nats", server.url])
    err = capsys.readouterr().err
    assert code == 2
    assert any(line.startswith("error: Connecting to nats://127.0.0.1:") for line in err.splitlines()), err
    assert "KUEUE_ES_NATS_USER=reader" in err
    assert "Traceback" not in err


def test_a_run_directory_of_up_or_demo_replays_its_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--store`` takes the run directory of ``up`` or ``demo`` (its store is ``<run dir>/nats``);
    a directory holding no store is refused naming the path to give, and is left as it was."""
    run = tmp_path / "run"
    asyncio.run(_write(run / "nats", golden(), auth=LocalAuth.create(run / "creds")))
    assert main(["replay", "--store", str(run)]) == 0
    assert "every decision matched; the log is complete" in capsys.readouterr().out
    logs = run / "logs"
    logs.mkdir()
    assert main(["replay", "--store", str(logs)]) == 2
    err = capsys.readouterr().err
    assert f"{logs} holds no nats store" in err and "<run dir>/nats" in err
    assert "KUEUE_ES_NATS_USER" not in err  # not the credentials hint: they are not the problem
    assert list(logs.iterdir()) == []  # no empty store started there


def test_a_multikueue_demo_directory_replays_the_managers_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``demo --multikueue`` prints its run directory; the manager's store is ``<run dir>/manager/nats``
    (each worker's beside it): ``--store <run dir>`` replays the manager's log (found by a new user)."""
    run = tmp_path / "mk-run"
    asyncio.run(_write(run / "manager" / "nats", golden(), auth=LocalAuth.create(run / "manager" / "creds")))
    assert main(["replay", "--store", str(run)]) == 0
    assert "every decision matched; the log is complete" in capsys.readouterr().out


def test_a_stopped_store_replays_with_the_runs_reader_variables_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README has a reader export $KUEUE_ES_NATS_USER and _PASSWORD_FILE for --nats; left set, they
    named the stopped run's password, which the store's server (fresh passwords) refused: replay and
    explain --store failed with an Authorization Violation (found by a new user)."""
    run_creds = LocalAuth.create(tmp_path / "run-creds")
    store = make_store(tmp_path, golden(), auth=run_creds)
    reader = run_creds.credentials("reader")
    monkeypatch.setenv("KUEUE_ES_NATS_USER", reader.user)
    monkeypatch.setenv("KUEUE_ES_NATS_PASSWORD_FILE", str(reader.password_file))
    assert main(["replay", "--store", str(store)]) == 0
    assert "every decision matched; the log is complete" in capsys.readouterr().out
    assert main(["explain", "default/sample-job", "--store", str(store)]) in (0, 1)
    out = capsys.readouterr()
    assert "Authorization" not in out.out + out.err and "NoServers" not in out.out + out.err


def test_without_a_source_it_replays_the_running_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --nats, --store or --file: the running system ``demo --keep`` or ``up`` recorded, read as its
    recorded reader (the server refuses a connection without a user); nothing running: exit 2, saying how
    to name one."""
    from kueue_es import current

    monkeypatch.setenv(current.STATE_ENV, str(tmp_path / "state"))
    for name in (current.FILE_ENV, current.URL_ENV, nats_bus.USER_ENV, nats_bus.PASSWORD_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    assert main(["replay"]) == 2
    assert "--store DIR" in capsys.readouterr().err

    auth = LocalAuth.create(tmp_path / "creds")
    store = tmp_path / "store"

    async def run() -> int:
        async with NatsServer(store_dir=store, auth=auth) as server:
            admin = auth.credentials("admin")
            bus = await nats_bus.connect(server.url, credentials=admin)
            await bus.close()
            nc = await nats.connect(server.url, user=admin.user, password=admin.password())
            try:
                js = nc.jetstream()
                for message in golden():
                    await js.publish(message.subject, message.data, headers=dict(message.headers))
            finally:
                await nc.close()
            current.record(
                nats_url=server.url, reader=auth.credentials("reader"), kubeconfig=None, run_dir=tmp_path, command="up"
            )
            try:
                return await asyncio.to_thread(main, ["replay"])
            finally:
                current.forget()

    assert asyncio.run(run()) == 0
    out = capsys.readouterr()
    assert "every decision matched; the log is complete" in out.out
    assert "replaying the log at nats://" in out.err and "up pid" in out.err
    # the reader's variables were this replay's only: a later connection in this process is not the reader's
    assert nats_bus.USER_ENV not in os.environ and nats_bus.PASSWORD_FILE_ENV not in os.environ
