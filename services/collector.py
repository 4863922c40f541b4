"""Python's cyclic garbage collector in a long-running service (issue 18, point 2).

Every service folds the log into a :class:`~kueue_es.projections.cluster.ClusterState` that lives
as long as the process. Reference counting frees what the fold drops: the fold makes no cyclic
garbage (tests/unit/test_gc_untracked.py), so the cyclic collector finds nothing there, yet each
full collection walks every object it tracks, the whole state. Two things keep that walk short:

- the events and API models the state keeps (and the log messages) are msgspec Structs with
  ``gc=False`` (:mod:`kueue_es.events.types`, :mod:`kueue_es.events.models`, Kueue's metric
  histograms): never tracked, so never walked; what stays tracked is the state's own objects
  (a ``WorkloadState`` each, the lists inside the models);
- :func:`install` (each service process calls it once, ``kueue-es service``): after every full
  collection the survivors are frozen (:func:`gc.freeze`, the collector's permanent generation),
  so the next full collection walks only what was made since; every ``deep_every``-th full
  collection first unfreezes them all (:func:`gc.unfreeze`) and so walks everything;
- :func:`install` also raises the youngest generation's threshold from Python's 700 to
  :data:`YOUNG_THRESHOLD` allocations of tracked objects: a service folding a message makes a few
  dozen, almost all freed by reference counting within the message, so at 700 the collector ran
  every few dozen messages and moved what happened to be alive on to the older generations,
  which their own collections then walked again (on the large-scale bench 2.0 of about 32 CPU
  seconds in the three Python processes went to the collector, 0.6 at 20,000: docs/benchmarks.md).

A frozen object is still freed by reference counting when it is dropped. One that becomes part of
an unreachable reference cycle while frozen (a state a service folded, then dropped: the state's
batch verifier refers back to it) waits for the next deep collection instead of the next full
one; memory stays bounded by what was alive at the last deep collection plus what was made since.
"""

from __future__ import annotations

import gc
from typing import Final

#: Every this many full collections, one walks the frozen objects too (see the module).
DEEP_EVERY: Final = 10
#: The youngest generation's threshold :func:`install` sets (Python's is 700; see the module).
YOUNG_THRESHOLD: Final = 20_000


class _FreezeSurvivors:
    """The :data:`gc.callbacks` entry of :func:`install`: ``full`` full collections seen, ``deep``
    of them deep (every frozen object unfrozen first)."""

    def __init__(self, deep_every: int) -> None:
        self.deep_every = deep_every
        self.full = 0
        self.deep = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self.full += 1
            if self.full % self.deep_every == 0:
                self.deep += 1
                gc.unfreeze()  # merged into the oldest generation, which this collection walks
        else:
            gc.freeze()  # the survivors: everything left after a full collection


_installed: _FreezeSurvivors | None = None
_thresholds_before: tuple[int, ...] | None = None


def install(*, deep_every: int = DEEP_EVERY, young_threshold: int = YOUNG_THRESHOLD) -> None:
    """From now on in this process, freeze the survivors of each full collection and walk them
    again every ``deep_every``-th one, and collect the youngest generation every
    ``young_threshold`` allocations of tracked objects (see the module). Once per process; a
    second call changes nothing. Raises ValueError when ``deep_every`` or ``young_threshold`` < 1."""
    global _installed, _thresholds_before
    if deep_every < 1:
        raise ValueError(f"deep_every {deep_every}: at least 1")
    if young_threshold < 1:
        raise ValueError(f"young_threshold {young_threshold}: at least 1")
    if _installed is None:
        _installed = _FreezeSurvivors(deep_every)
        gc.callbacks.append(_installed)
        _thresholds_before = gc.get_threshold()
        gc.set_threshold(young_threshold, *_thresholds_before[1:])


def uninstall() -> None:
    """Undo :func:`install`: the collector as Python sets it, every frozen object unfrozen."""
    global _installed, _thresholds_before
    if _installed is not None:
        gc.callbacks.remove(_installed)
        _installed = None
    if _thresholds_before is not None:
        gc.set_threshold(*_thresholds_before)
        _thresholds_before = None
    gc.unfreeze()


def stats() -> tuple[int, int]:
    """Full collections seen since :func:`install`, and how many of them were deep ((0, 0) when not installed)."""
    return (0, 0) if _installed is None else (_installed.full, _installed.deep)
