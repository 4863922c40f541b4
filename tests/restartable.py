"""A nats-server that can be killed and started again on the same store and port (tests only)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from kueue_es.events.bus import server


def free_port() -> int:
    """A TCP port nothing listens on now (127.0.0.1), for a server that keeps it across restarts: below the
    kernel's ephemeral range, where no outgoing connection's source port takes it meanwhile
    (:func:`server.free_ports`)."""
    return server.free_ports(1)[0]


class RestartableServer(server.NatsServer):
    """:class:`server.NatsServer` on a fixed client port, so clients reconnect to the same URL after
    :meth:`kill` and :meth:`start` again (``kueue-es up``'s server keeps its port the same way)."""

    def __init__(self, store_dir: Path, *, port: int | None = None) -> None:
        super().__init__(store_dir)
        self.port = port if port is not None else free_port()

    def _config(self) -> dict[str, object]:
        config = super()._config()
        config["port"] = self.port
        return config

    def kill(self) -> None:
        """SIGKILL the server (no goodbye to its clients) and reap it; :meth:`start` starts it again."""
        process = self._process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        self._process = None
        self._monitor = None
        for stale in self.store_dir.glob("*.ports"):
            stale.unlink()

    def restart(self, *, timeout: float = 20.0) -> float:
        """Start the server again; returns the monotonic time it accepted connections again."""
        self.start(timeout=timeout)
        return time.monotonic()
