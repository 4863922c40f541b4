"""Where the running kueue-es is: what ``demo --keep`` and ``up`` record, and what the log readers use.

``kueue-es explain``, ``list``, ``status``, ``what-if`` and ``kubectl kueue`` read the log of a running
system. As kubectl finds its cluster in a kubeconfig, they find the system here, first match wins:

1. ``--nats URL`` on the command line (the NATS user from ``$KUEUE_ES_NATS_USER`` and
   ``$KUEUE_ES_NATS_PASSWORD_FILE``, as every command takes it; without them, for the URL of a system
   recorded as below, the reading user it recorded);
2. ``$KUEUE_ES_NATS_URL``, with the same user variables and the same fallback;
3. what ``demo --keep`` and ``up`` record while they run, one file per process in
   :func:`state_dir`/systems (``$KUEUE_ES_STATE_DIR``, else ``$XDG_STATE_HOME/kueue-es``, else
   ``~/.local/state/kueue-es``), the newest still running first: the NATS URL, the read-only ``reader``
   user and its password file (never the password), the kubeconfig of an emulated cluster, and the
   recording process, so a record left by a process that is gone is not used (and is removed).
   ``$KUEUE_ES_CURRENT=FILE`` pins one record file instead (read and written as that one file).

With several running, the newest is read, and the command says so on stderr (:func:`choice_note`: which one
it read, and the others' NATS URLs to name one with ``--nats``), keeping stdout for its answer. ``kubectl
kueue`` reads, as kubectl talks to, the cluster of the kubeconfig in use: it names the system that recorded
that kubeconfig with ``--nats`` (:func:`kueue_es.kueuectl.connect.system_for`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueue_es.events.bus.nats import PASSWORD_FILE_ENV, USER_ENV, credentials_from_env
from kueue_es.events.bus.server import Credentials

URL_ENV = "KUEUE_ES_NATS_URL"
FILE_ENV = "KUEUE_ES_CURRENT"
STATE_ENV = "KUEUE_ES_STATE_DIR"


class NoSystemError(Exception):
    """No running kueue-es was found; the message says how to name one."""


@dataclass(frozen=True, kw_only=True)
class System:
    """A running system's log: its NATS URL, the user to read it as (None: the environment's, or none),
    where the answer came from (for messages), and the kubeconfig of its cluster when recorded."""

    nats_url: str
    credentials: Credentials | None
    origin: str
    kubeconfig: Path | None = None
    others: tuple[str, ...] = ()  # the other running systems when this one was taken as the newest


def choice_note(system: System) -> str:
    """What a command that picked ``system`` by itself says on stderr (as ``replay`` does): "" when it was
    the only one running (or named: ``--nats``, ``$KUEUE_ES_NATS_URL``, ``$KUEUE_ES_CURRENT``); else
    which one it read and the others, with their NATS URLs to name one with ``--nats``."""
    if not system.others:
        return ""
    return f"reading the log at {system.nats_url} ({system.origin})"


def state_dir() -> Path:
    """Where running systems are recorded: ``$KUEUE_ES_STATE_DIR``, else ``$XDG_STATE_HOME/kueue-es``,
    else ``~/.local/state/kueue-es``; one file per recording process in its ``systems/``."""
    if explicit := os.environ.get(STATE_ENV, "").strip():
        return Path(explicit)
    state_home = os.environ.get("XDG_STATE_HOME", "").strip()
    base = Path(state_home) if state_home else Path.home() / ".local" / "state"
    return base / "kueue-es"


def path() -> Path:
    """This process's record: ``$KUEUE_ES_CURRENT`` when set (one file, pinned), else
    ``state_dir()/systems/<pid>.json``."""
    if explicit := os.environ.get(FILE_ENV, "").strip():
        return Path(explicit)
    return state_dir() / "systems" / f"{os.getpid()}.json"


def record(*, nats_url: str, reader: Credentials | None, kubeconfig: Path | None, run_dir: Path, command: str) -> Path:
    """Record this process's system (``command``: ``demo`` or ``up``); returns the file written. Several
    running systems each have their own record; :func:`find` takes the newest still running, and
    :func:`forget` removes only this process's. Raises OSError when it cannot be written."""
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "natsUrl": nats_url,
        "user": reader.user if reader is not None else None,
        "passwordFile": str(reader.password_file) if reader is not None else None,
        "kubeconfig": str(kubeconfig) if kubeconfig is not None else None,
        "runDir": str(run_dir),
        "command": command,
        "pid": os.getpid(),
        "recordedAt": time.time(),
    }
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(json.dumps(body, indent=2) + "\n")
    temporary.replace(target)
    return target


def forget() -> None:
    """Remove this process's record (another system's record stays)."""
    target = path()
    try:
        body = json.loads(target.read_text())
    except (OSError, ValueError):
        return
    if body.get("pid") == os.getpid():
        target.unlink(missing_ok=True)


def find(nats_url: str | None = None) -> System:
    """The system to read (see the module for the order). Raises NoSystemError when none is named or
    recorded, and BusError when only one of the NATS user variables is set."""
    if nats_url:
        return _named(nats_url, origin="--nats")
    if from_env := os.environ.get(URL_ENV, "").strip():
        return _named(from_env, origin=f"${URL_ENV}")
    if os.environ.get(FILE_ENV, "").strip():
        return _pinned()
    running = _running(state_dir() / "systems")
    if not running:
        raise NoSystemError(_none_found(f"no running system recorded in {state_dir() / 'systems'}"))
    body = running[0]
    origin = _describe(body, url=False)
    others = tuple(_describe(b, url=True) for b in running[1:])
    if others:
        origin += f" (the newest of {len(running)} running; also {', '.join(others)}: name one with --nats)"
    return _system(body, origin=origin, others=others)


def _named(nats_url: str, *, origin: str) -> System:
    """The system at ``nats_url``, named by ``origin`` (``--nats`` or ``$KUEUE_ES_NATS_URL``): as the user of
    the environment's variables when they name one, else, when that URL is a recorded running system's (the
    one the note of several running systems tells to name with ``--nats``), as its reading user and with its
    kubeconfig; else with no user. Without this, naming a running demo by its URL was refused by its
    nats-server (Authorization Violation), though the same demo read bare worked."""
    credentials = credentials_from_env()
    if credentials is not None:
        return System(nats_url=nats_url, credentials=credentials, origin=origin)
    for system in running():
        if system.nats_url.rstrip("/") == nats_url.rstrip("/"):
            return System(
                nats_url=nats_url,
                credentials=system.credentials,
                origin=f"{origin}: {system.origin}",
                kubeconfig=system.kubeconfig,
            )
    return System(nats_url=nats_url, credentials=None, origin=origin)


def running() -> list[System]:
    """Every system recorded as running, newest first (``$KUEUE_ES_CURRENT``'s alone when it is set; the
    environment's ``$KUEUE_ES_NATS_URL`` is none of them): for a reader that looks for the one with a given
    NATS URL or kubeconfig rather than the newest."""
    if os.environ.get(FILE_ENV, "").strip():
        try:
            return [_pinned()]
        except NoSystemError:
            return []
    found = []
    for body in _running(state_dir() / "systems"):
        try:
            found.append(_system(body, origin=_describe(body, url=False)))
        except NoSystemError:
            continue
    return found


def _pinned() -> System:
    """The system of the record ``$KUEUE_ES_CURRENT`` pins; NoSystemError when it is missing, unreadable or
    names a process that is gone."""
    target = path()
    try:
        body = json.loads(target.read_text())
    except FileNotFoundError:
        raise NoSystemError(_none_found(f"no {target}")) from None
    except (OSError, ValueError) as err:
        raise NoSystemError(_none_found(f"{target} is unreadable: {err}")) from None
    pid = body.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        raise NoSystemError(_none_found(f"{target} names process {pid}, which is not running"))
    return _system(body, origin=f"{target} ({body.get('command', '?')}, pid {pid})")


def _describe(body: dict[str, Any], *, url: bool) -> str:
    text = f"{body.get('command', '?')} pid {body['pid']}"
    return text + (f" at {body.get('natsUrl')}" if url else f", run dir {body.get('runDir')}")


def _running(directory: Path) -> list[dict[str, Any]]:
    """The records in ``directory`` of processes still running, newest first; a dead one's is removed."""
    found: list[dict[str, Any]] = []
    for entry in directory.glob("*.json"):
        try:
            body = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        pid = body.get("pid")
        if not isinstance(pid, int) or not _alive(pid):
            entry.unlink(missing_ok=True)  # a system that did not stop cleanly (SIGKILL) left it
            continue
        if isinstance(body.get("natsUrl"), str) and body["natsUrl"]:
            found.append(body)
    found.sort(key=lambda b: (float(b.get("recordedAt") or 0), int(b["pid"])), reverse=True)
    return found


def _system(body: dict[str, Any], *, origin: str, others: tuple[str, ...] = ()) -> System:
    url = body.get("natsUrl")
    if not isinstance(url, str) or not url:
        raise NoSystemError(_none_found(f"{origin} has no natsUrl"))
    user, password_file = body.get("user"), body.get("passwordFile")
    credentials = Credentials(user=user, password_file=Path(password_file)) if user and password_file else None
    kubeconfig = body.get("kubeconfig")
    return System(
        nats_url=url,
        credentials=credentials or credentials_from_env(),
        origin=origin,
        kubeconfig=Path(kubeconfig) if kubeconfig else None,
        others=others,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True


def _none_found(why: str) -> str:
    return (
        f"no running kueue-es found ({why}): start one with `kueue-es demo --keep` or `kueue-es up`, or name one"
        f" with --nats URL or ${URL_ENV} (as the read-only user: ${USER_ENV}=reader ${PASSWORD_FILE_ENV}=FILE)"
    )
