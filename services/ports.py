"""Telling the process that started a service which port it bound (``kueue-es up`` and ``demo``).

A supervisor that picked a "free" port up front (bind port 0, close, pass the number on) races
every other process on the machine: one that takes the port before the service binds it leaves
the service restarting in a loop. So the supervisor passes port 0 (the kernel picks one as the
service binds it) and sets :data:`PORTS_DIR_ENV` to a directory of its own; every server of the
process then writes the port it got to ``<dir>/<kind>`` (:func:`report`), where the supervisor
reads it (:func:`read`). Without the variable (a service run by hand, in a pod) nothing is written.

Kinds: :data:`HEALTH` (``--health-port``'s /healthz, /readyz, /metrics), :data:`API` (the visibility
API's HTTPS port), :data:`HTTP` (the dashboard's). Standard library only: every service imports it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PORTS_DIR_ENV = "KUEUE_ES_PORTS_DIR"
HEALTH, API, HTTP = "health", "api", "http"
KINDS = (HEALTH, API, HTTP)


def report(kind: str, port: int, *, environ: Mapping[str, str] = os.environ) -> Path | None:
    """Write ``port`` (the TCP port a server of this process bound) to ``$KUEUE_ES_PORTS_DIR/<kind>``;
    returns the file, or None when the variable is unset. The file appears whole (written beside it,
    then renamed), so a reader never sees half a number. Raises ValueError for an unknown ``kind`` or
    a port outside 1..65535, OSError when the directory cannot be written."""
    if kind not in KINDS:
        raise ValueError(f"ports.report: kind {kind!r} is not one of {', '.join(KINDS)}")
    if not 0 < port < 65536:
        raise ValueError(f"ports.report: {kind} port {port} is not a bound TCP port (1..65535)")
    directory = environ.get(PORTS_DIR_ENV)
    if not directory:
        return None
    path = Path(directory) / kind
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{kind}.{os.getpid()}")
    partial.write_text(f"{port}\n")
    partial.replace(path)
    return path


def read(directory: Path, kind: str) -> int | None:
    """The port a process reported for ``kind`` under ``directory`` (:func:`report`), or None while it has
    not (yet). Raises ValueError naming the file when it holds something other than a port number."""
    path = directory / kind
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        port = int(text.strip())
    except ValueError:
        raise ValueError(f"{path}: {text.strip()!r} is not a port number") from None
    if not 0 < port < 65536:
        raise ValueError(f"{path}: {port} is not a TCP port (1..65535)")
    return port
