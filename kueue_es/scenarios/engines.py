"""Engines run scenarios; this is their protocol and the registry by name.

An engine takes a loaded :class:`~kueue_es.scenarios.specs.Scenario` and returns
its :class:`~kueue_es.scenarios.outcome.Outcome`; every engine must give the same
outcome for the same scenario (shared/scenarios/README.md). ``core`` folds the
pure deciders in-process (:mod:`kueue_es.scenarios.core_engine`).

``bus`` (:mod:`kueue_es.scenarios.bus_engine`) runs nats-server and the five
services as processes per scenario; it is imported lazily, so core runs never
load NATS.

``cluster`` (:mod:`kueue_es.scenarios.cluster_engine`) runs the same system but goes
through the Kubernetes API: objects and workloads are created there, and the
outcome is read back from the Workload objects.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.projections.cluster import ClusterState
from kueue_es.scenarios.outcome import Outcome
from kueue_es.scenarios.specs import ENGINE_NAMES, DeleteEvent, Scenario


class Engine(Protocol):
    """What ``kueue-es scenario`` and the tests need of an engine."""

    name: str

    def run(self, scenario: Scenario) -> Outcome:
        """Run ``scenario`` to its end; raises RunError when the run cannot finish."""
        ...

    def close(self) -> None:
        """Release what the engine kept between runs (servers, temp dirs)."""
        ...


def deletion_fact(event: DeleteEvent, state: ClusterState, *, uid: str, at_ms: int) -> types.Fact:
    """The fact the watcher logs for ``event`` (a modelled kind) on a cluster as ``state`` folds it.

    A ClusterQueue some workload still reserves quota in is held by Kueue's resource-in-use finalizer: the
    watcher reports it marked for deletion (:data:`~kueue_es.events.models.TERMINATING_ANNOTATION`, at
    ``at_ms``), not gone. Anything else is an ObjectDeleted (``uid``: the Workload's, "" for other kinds).
    """
    cq = state.cluster_queues.get(event.name) if event.kind == "ClusterQueue" else None
    if cq is not None and state.reserved.get(event.name):
        annotations = {**cq.metadata.annotations, models.TERMINATING_ANNOTATION: manifests.format_time_ms(at_ms)}
        held = msgspec.structs.replace(cq, metadata=msgspec.structs.replace(cq.metadata, annotations=annotations))
        return types.ClusterQueueObserved(cluster_queue=held)
    return types.ObjectDeleted(kind=event.kind, namespace=event.namespace, name=event.name, uid=uid)


class EngineUnavailable(Exception):
    """The engine asked for is unknown or not built yet; the message says which."""


class RunError(Exception):
    """A valid scenario whose run could not finish (it does not settle, an engine failed).

    ``file`` and ``problem`` as in ScenarioError; the CLI reports it as a failure.
    """

    def __init__(self, file: str | Path, problem: str) -> None:
        self.file, self.problem = str(file), problem
        super().__init__(f"{file}: {problem}")


def _open_core() -> Engine:
    from kueue_es.scenarios.core_engine import CoreEngine

    return CoreEngine()


def _open_bus() -> Engine:
    from kueue_es.scenarios.bus_engine import BusEngine

    return BusEngine()


def _open_cluster() -> Engine:
    from kueue_es.scenarios.cluster_engine import ClusterEngine

    return ClusterEngine()


_FACTORIES: dict[str, Callable[[], Engine]] = {"core": _open_core, "bus": _open_bus, "cluster": _open_cluster}


def available() -> list[str]:
    """Names of the engines :func:`open_engine` can open now."""
    return sorted(_FACTORIES)


def register(name: str, *, factory: Callable[[], Engine]) -> None:
    """Make ``factory`` the engine opened as ``name`` (tests and plug-ins; ``name`` from ENGINE_NAMES)."""
    if name not in ENGINE_NAMES:
        raise ValueError(f"engine names are {', '.join(ENGINE_NAMES)}, not {name!r}")
    _FACTORIES[name] = factory


def open_engine(name: str) -> Engine:
    """A ready engine by name; close it when done. Raises EngineUnavailable."""
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory()
    if name in ENGINE_NAMES:
        raise EngineUnavailable(f"the {name} engine is not available yet")
    raise EngineUnavailable(f"unknown engine {name!r} (engines: {', '.join(ENGINE_NAMES)})")
