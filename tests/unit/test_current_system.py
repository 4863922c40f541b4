"""Finding the running kueue-es (kueue_es.current): --nats, then $KUEUE_ES_NATS_URL, then the file that
demo --keep and up write, never a file left by a process that is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kueue_es import current
from kueue_es.events.bus.server import Credentials


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(current.FILE_ENV, str(tmp_path / "state" / "current.json"))
    for name in (current.URL_ENV, "KUEUE_ES_NATS_USER", "KUEUE_ES_NATS_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_nothing_recorded_says_how_to_name_a_system() -> None:
    with pytest.raises(current.NoSystemError, match=r"demo --keep.*--nats URL"):
        current.find()


def test_the_recorded_system_is_found_with_its_reader(tmp_path: Path) -> None:
    reader = Credentials(user="reader", password_file=tmp_path / "reader.password")
    written = current.record(
        nats_url="nats://127.0.0.1:4999", reader=reader, kubeconfig=tmp_path / "kc", run_dir=tmp_path, command="demo"
    )
    assert json.loads(written.read_text())["pid"] == os.getpid()
    assert "password" not in json.loads(written.read_text()).get("passwordFile", "x").replace("reader.password", "")
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


def test_a_file_left_by_a_dead_process_is_not_used(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    target = current.path()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"natsUrl": "nats://gone:1", "pid": pid}))
    with pytest.raises(current.NoSystemError, match=f"process {pid}, which is not running"):
        current.find()


def test_forget_leaves_another_process_record(tmp_path: Path) -> None:
    target = current.path()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"natsUrl": "nats://other:1", "pid": 1}))
    current.forget()
    assert target.exists()
