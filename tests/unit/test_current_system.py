"""Finding the running kueue-es (kueue_es.current): --nats, then $KUEUE_ES_NATS_URL, then what demo --keep
and up record, one record per process, the newest still running first; never a record left by a
process that is gone; a pinned $KUEUE_ES_CURRENT file instead when set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kueue_es import current
from kueue_es.events.bus.server import Credentials


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(current.STATE_ENV, str(tmp_path / "state"))
    for name in (current.FILE_ENV, current.URL_ENV, "KUEUE_ES_NATS_USER", "KUEUE_ES_NATS_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _other_record(tmp_path: Path, *, pid: int, url: str, at: float) -> Path:
    target = current.state_dir() / "systems" / f"{pid}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"natsUrl": url, "pid": pid, "command": "demo", "recordedAt": at}))
    return target


def test_nothing_recorded_says_how_to_name_a_system() -> None:
    with pytest.raises(current.NoSystemError, match=r"demo --keep.*--nats URL"):
        current.find()


def test_the_recorded_system_is_found_with_its_reader(tmp_path: Path) -> None:
    reader = Credentials(user="reader", password_file=tmp_path / "reader.password")
    written = current.record(
        nats_url="nats://127.0.0.1:4999", reader=reader, kubeconfig=tmp_path / "kc", run_dir=tmp_path, command="demo"
    )
    body = json.loads(written.read_text())
    assert body["pid"] == os.getpid() and body["passwordFile"] == str(tmp_path / "reader.password")
    found = current.find()
    assert found.nats_url == "nats://127.0.0.1:4999"
    assert found.credentials == reader
    assert found.kubeconfig == tmp_path / "kc"
    assert "demo" in found.origin
    current.forget()
    assert not written.exists()


def test_explicit_url_and_environment_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    current.record(nats_url="nats://recorded:1", reader=None, kubeconfig=None, run_dir=tmp_path, command="up")
    monkeypatch.setenv(current.URL_ENV, "nats://from-env:2")
    assert current.find().nats_url == "nats://from-env:2"
    assert current.find("nats://flag:3").nats_url == "nats://flag:3"


def test_the_newest_running_system_wins_and_stopping_it_leaves_the_older(tmp_path: Path) -> None:
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _other_record(tmp_path, pid=older.pid, url="nats://older:1", at=time.time() - 100)
        current.record(nats_url="nats://newer:2", reader=None, kubeconfig=None, run_dir=tmp_path, command="up")
        found = current.find()
        assert found.nats_url == "nats://newer:2"
        assert f"the newest of 2 running; also demo pid {older.pid} at nats://older:1" in found.origin
        assert "nats://newer:2" in current.choice_note(found) and "nats://older:1" in current.choice_note(found)
        assert [system.nats_url for system in current.running()] == ["nats://newer:2", "nats://older:1"]
        current.forget()  # the newer one stops: the older one, still running, is found again
        alone = current.find()
        assert alone.nats_url == "nats://older:1" and current.choice_note(alone) == ""  # one: nothing to say
    finally:
        older.kill()
        older.wait()


def test_a_record_left_by_a_dead_process_is_not_used_and_is_removed(tmp_path: Path) -> None:
    left = _other_record(tmp_path, pid=_dead_pid(), url="nats://gone:1", at=time.time())
    with pytest.raises(current.NoSystemError, match="no running system recorded"):
        current.find()
    assert not left.exists()


def test_a_pinned_file_is_read_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = tmp_path / "pinned.json"
    monkeypatch.setenv(current.FILE_ENV, str(pinned))
    pid = _dead_pid()
    pinned.write_text(json.dumps({"natsUrl": "nats://gone:1", "pid": pid}))
    with pytest.raises(current.NoSystemError, match=f"process {pid}, which is not running"):
        current.find()
    pinned.write_text(json.dumps({"natsUrl": "nats://pinned:1", "pid": os.getpid()}))
    assert current.find().nats_url == "nats://pinned:1"


def test_forget_leaves_another_process_record(tmp_path: Path) -> None:
    other = _other_record(tmp_path, pid=1, url="nats://other:1", at=time.time())
    current.forget()
    assert other.exists()


def test_a_running_system_named_by_its_url_is_read_as_its_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With several running, the note says "name one with --nats": the one named must then be read as the
    # reader it recorded, or its nats-server refuses the connection (Authorization Violation).
    reader = Credentials(user="reader", password_file=tmp_path / "reader.password")
    current.record(
        nats_url="nats://127.0.0.1:4999", reader=reader, kubeconfig=tmp_path / "kc", run_dir=tmp_path, command="demo"
    )
    named = current.find("nats://127.0.0.1:4999/")
    assert named.nats_url == "nats://127.0.0.1:4999/"
    assert named.credentials == reader and named.kubeconfig == tmp_path / "kc"
    assert named.origin.startswith("--nats: demo pid")
    assert current.find("nats://127.0.0.1:5000").credentials is None  # no system recorded there
    monkeypatch.setenv(current.URL_ENV, "nats://127.0.0.1:4999")
    assert current.find().credentials == reader
    own = tmp_path / "own.password"
    monkeypatch.setenv("KUEUE_ES_NATS_USER", "admin")
    monkeypatch.setenv("KUEUE_ES_NATS_PASSWORD_FILE", str(own))
    assert current.find("nats://127.0.0.1:4999").credentials == Credentials(user="admin", password_file=own)
