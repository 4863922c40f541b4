"""Kueue's manager configuration file, followed: ConfigurationObserved at start and on every change.

Why this module exists: the deciders read Kueue's settings (fair sharing, admission
fair sharing, waitForPodsReady, resource transformations, feature gates) from the
log, where a ConfigurationObserved fact puts them; the settings themselves live in
a file in Kueue's format (``--config FILE``, in a cluster the ConfigMap
``kueue-manager-config`` mounted at ``/controller_manager_config.yaml``, as Kueue
mounts it). :class:`ConfigFile` reads it (:mod:`kueue_es.events.manager_config`
parses and checks it), publishes the Configuration when it differs from the one the
log holds, and polls the file (its content, so a ConfigMap volume's symlink swap or
an editor's rename is seen like an in-place write) to publish each change once.

A file's settings are published at start unless the log already holds the same
(they are recorded once even when they are Kueue's defaults). Without a file,
Kueue's defaults are in force: nothing is published unless the log holds another
Configuration (an earlier run's file), which is then replaced by the defaults. A file that becomes invalid while running is reported (an ObjectRejected
fact naming the field, and an error in the log) and the last valid settings stay in
force; a file invalid at start stops the watcher (:func:`load` raises), as it stops
Kueue. The watcher's own settings in the file (manageJobsWithoutQueueName,
managedJobsNamespaceSelector, integrations.frameworks) are read at start only; a change to them is logged as
needing a restart, as every change does for Kueue.

The Msg-Id of a ConfigurationObserved is the number of Configurations the log held
before it and the digest of the settings, so a retry is deduplicated while going
back to an earlier file within JetStream's duplicate window is not.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from kueue_es.events import codec, manager_config, models, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.manifests import ManifestError
from kueue_es.services.watcher.publishing import Publisher

log = structlog.get_logger(__name__)

DEFAULT_POLL_SECONDS = 2.0


def load(path: Path | None, *, feature_gates: str = "") -> manager_config.ManagerConfig:
    """The settings of the file at ``path`` (None: Kueue's defaults, with ``feature_gates`` applied).

    Raises ManifestError naming the file and the field, or OSError when it cannot be read.
    """
    if path is None:
        text = f"apiVersion: {manager_config.API_VERSIONS[0]}\nkind: Configuration\n"
        return manager_config.parse(text, source="<defaults>", feature_gates=feature_gates)
    return manager_config.parse(path.read_text(), source=str(path), feature_gates=feature_gates)


class ConfigFile:
    """Publishes the Configuration in force through ``publisher``: at :meth:`start` and, while
    :meth:`follow` runs, whenever the file's settings change (polled every ``poll_seconds``).

    ``initial``: the settings :func:`load` read at start-up; ``clock``: ms since the epoch.
    """

    def __init__(
        self,
        *,
        path: Path | None,
        initial: manager_config.ManagerConfig,
        publisher: Publisher,
        feature_gates: str = "",
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.path, self.current, self.publisher = path, initial, publisher
        self.feature_gates, self.poll_seconds, self.clock = feature_gates, poll_seconds, clock
        self.on_log: models.Configuration = models.Configuration()  # the last one the log holds
        self.count = 0  # ConfigurationObserved facts on the log
        self._read: bytes | None = None  # the file's bytes last read

    def learn(self, message: LogMessage) -> None:
        """Count a ConfigurationObserved already on the log and remember the last one."""
        if message.headers.get("Kq-Type") != "ConfigurationObserved":
            return
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            return
        if isinstance(event, types.ConfigurationObserved):
            self.count += 1
            self.on_log = event.configuration

    async def start(self) -> None:
        """Publish the settings read at start-up unless the log already holds them."""
        if self.path is not None:
            self._read = _read_bytes(self.path)
        for what in self.current.not_done:
            log.warning("config_not_done", path=str(self.path), what=what)
        await self._publish(self.current.configuration)

    async def follow(self) -> None:
        """Poll the file forever (cancel to stop); nothing to do without one."""
        if self.path is None:
            return
        while True:
            await asyncio.sleep(self.poll_seconds)
            try:
                await self.check()
            except Exception:  # a bad read never stops the watcher
                log.exception("config_check_failed", path=str(self.path))

    async def check(self) -> None:
        """Read the file once; publish its settings if they changed, report it if it is invalid."""
        assert self.path is not None
        try:
            data = _read_bytes(self.path)
        except OSError as err:
            log.warning("config_unreadable", path=str(self.path), error=str(err))
            return
        if data == self._read:
            return
        self._read = data
        try:
            new = manager_config.parse(data.decode(), source=str(self.path), feature_gates=self.feature_gates)
        except (ManifestError, UnicodeDecodeError) as err:
            field = getattr(err, "field", "")
            problem = getattr(err, "problem", str(err))
            log.error("config_invalid", path=str(self.path), field=field, problem=problem)
            rejected = types.ObjectRejected(
                kind="Configuration", name="config", field=field, problem=f"{self.path}: {problem}", at_ms=self.clock()
            )
            await self.publisher.publish(rejected, version=f"rejected.{hashlib.sha256(data).hexdigest()[:16]}")
            return
        if (new.manage_jobs_without_queue_name, new.managed_jobs_namespace_selector, new.frameworks) != (
            self.current.manage_jobs_without_queue_name,
            self.current.managed_jobs_namespace_selector,
            self.current.frameworks,
        ):
            log.warning(
                "config_restart_needed",
                path=str(self.path),
                detail="manageJobsWithoutQueueName, managedJobsNamespaceSelector and integrations.frameworks are"
                " read at start: restart the watcher",
            )
        self.current = new
        await self._publish(new.configuration)

    async def _publish(self, configuration: models.Configuration) -> None:
        """Publish ``configuration`` unless the log holds the same; a file's settings are recorded once
        even when they are Kueue's defaults."""
        digest = manager_config.digest(configuration)
        recorded = self.count > 0 or self.path is None
        if recorded and digest == manager_config.digest(self.on_log):
            return
        fact = types.ConfigurationObserved(configuration=configuration)
        await self.publisher.emit(fact, version=f"{self.count}.{digest[:16]}")
        self.count += 1
        self.on_log = configuration
        log.info("configuration_observed", path=str(self.path or "<defaults>"), digest=digest[:16])


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, through any symlinks (a ConfigMap volume swaps its ``..data`` link)."""
    return path.resolve().read_bytes()
