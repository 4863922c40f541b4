"""``service deciders``: what the supervisor starts and with which credentials, and what the CLI refuses."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from kueue_es import cli
from kueue_es.events.bus.server import LocalAuth
from kueue_es.supervisor import DECIDERS, SERVICES, Supervisor, _processes, cohosted


def test_up_runs_one_deciders_process_in_place_of_the_three() -> None:
    assert cohosted(SERVICES) == ("watcher", DECIDERS, "dispatcher", "multikueue")
    assert cohosted(("admitter", "dispatcher")) == (DECIDERS, "dispatcher")
    separate = _processes(argparse.Namespace(deciders="separate"))
    together = _processes(argparse.Namespace(deciders="cohosted"))
    assert {"admitter", "preemptor", "tas-placer"} <= set(separate) and DECIDERS not in separate
    assert DECIDERS in together and not {"admitter", "preemptor", "tas-placer"} & set(together)
    supervisor = Supervisor(nats_url="nats://127.0.0.1:4222", log_dir=Path("/tmp/unused"), health_port=9000)
    args = supervisor.service_args(DECIDERS)
    assert args[:2] == ["service", DECIDERS]
    assert args[args.index("--health-port") + 1] == "9001"  # the admitter's


def test_the_deciders_process_gets_the_three_roles_passwords_only(tmp_path: Path) -> None:
    auth = LocalAuth.create(tmp_path / "creds")
    supervisor = Supervisor(nats_url="nats://127.0.0.1:4222", log_dir=tmp_path / "logs", auth=auth)
    directory = supervisor._cohosted_passwords()
    assert sorted(p.name for p in directory.iterdir()) == [
        "admitter.password",
        "preemptor.password",
        "tas-placer.password",
    ]
    for user in ("admitter", "preemptor", "tas-placer"):
        copy = directory / f"{user}.password"
        assert copy.read_text() == auth.credentials(user).password_file.read_text()
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def _args(**given: object) -> argparse.Namespace:
    values: dict[str, object] = {"name": DECIDERS, "nats_password_dir": None, "nats_user": None}
    values.update(given)
    return argparse.Namespace(**values)


def test_the_cli_refuses_one_user_for_the_three_roles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cli.PASSWORD_DIR_ENV, raising=False)
    monkeypatch.setenv("KUEUE_ES_NATS_USER", "admitter")
    problem = cli._cohosted_credentials(_args())
    assert problem is not None and "three NATS users" in problem
    (tmp_path / "admitter.password").write_text("x\n")
    problem = cli._cohosted_credentials(_args(nats_password_dir=tmp_path))
    assert problem is not None and "preemptor.password" in problem and "tas-placer.password" in problem
    assert cli._cohosted_credentials(_args(name="admitter", nats_password_dir=tmp_path)) is not None


def test_the_cli_connects_the_fold_as_the_admitter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUEUE_ES_NATS_USER", raising=False)
    monkeypatch.delenv("KUEUE_ES_NATS_PASSWORD_FILE", raising=False)
    for user in ("admitter", "preemptor", "tas-placer"):
        (tmp_path / f"{user}.password").write_text("x\n")
    monkeypatch.setenv(cli.PASSWORD_DIR_ENV, str(tmp_path))
    args = _args()
    assert cli._cohosted_credentials(args) is None
    assert args.nats_password_dir == tmp_path.resolve()
    assert os.environ["KUEUE_ES_NATS_USER"] == "admitter"  # snapshots are read as the fold's role
    assert os.environ["KUEUE_ES_NATS_PASSWORD_FILE"] == str(tmp_path.resolve() / "admitter.password")
