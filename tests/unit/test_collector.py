"""services/collector.py: the survivors of a full collection are frozen out of the next ones, and
every ``deep_every``-th full collection walks them again, so a frozen cycle is freed then."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from kueue_es.services import collector


class _Cyclic:
    """An object in a reference cycle with itself, which only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def no_automatic_collections() -> Iterator[None]:
    """Only the test's own gc.collect() calls run (each is a full collection), the policy undone after."""
    was = gc.isenabled()
    gc.disable()
    gc.collect()
    try:
        yield
    finally:
        collector.uninstall()
        if was:
            gc.enable()


@pytest.mark.usefixtures("no_automatic_collections")
def test_a_frozen_cycle_is_freed_by_the_next_deep_collection_not_before() -> None:
    """Alive at a full collection, the object is frozen; dropped, the next full collection does not
    see it, the deep one (the third here) frees it."""
    collector.install(deep_every=3)
    kept = _Cyclic()
    alive = weakref.ref(kept)
    gc.collect()  # full collection 1: ``kept`` survives and is frozen
    assert gc.get_freeze_count() > 0
    del kept
    gc.collect()  # 2: it is garbage now, but frozen: not walked
    assert alive() is not None
    gc.collect()  # 3: deep (everything unfrozen first): freed
    assert alive() is None
    assert collector.stats() == (3, 1)


@pytest.mark.usefixtures("no_automatic_collections")
def test_without_the_policy_the_same_cycle_is_freed_at_once() -> None:
    """The control: Python's own collector frees the dropped cycle at the next full collection."""
    kept = _Cyclic()
    alive = weakref.ref(kept)
    gc.collect()
    del kept
    gc.collect()
    assert alive() is None
    assert collector.stats() == (0, 0)


@pytest.mark.usefixtures("no_automatic_collections")
def test_young_cyclic_garbage_is_freed_by_the_next_collection_as_usual() -> None:
    """What becomes garbage before any full collection saw it is never frozen."""
    collector.install(deep_every=10)
    gc.collect()
    dropped = _Cyclic()
    alive = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert alive() is None


@pytest.mark.usefixtures("no_automatic_collections")
def test_install_is_once_per_process_and_uninstall_unfreezes() -> None:
    collector.install(deep_every=2)
    collector.install(deep_every=5)  # no change
    assert sum(1 for cb in gc.callbacks if isinstance(cb, collector._FreezeSurvivors)) == 1
    gc.collect()
    gc.collect()
    assert collector.stats() == (2, 1)
    collector.uninstall()
    assert gc.get_freeze_count() == 0
    assert not any(isinstance(cb, collector._FreezeSurvivors) for cb in gc.callbacks)
    with pytest.raises(ValueError, match="deep_every 0"):
        collector.install(deep_every=0)


def test_the_young_generation_is_collected_once_per_young_threshold_allocations() -> None:
    """A fold allocates a few dozen tracked objects a message, nearly all freed by reference counting:
    with Python's 700 the youngest generation was collected every few dozen messages. Installed, the
    collector waits ``young_threshold`` allocations; uninstalled, Python's threshold is back."""
    before = gc.get_threshold()
    young: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            young.append(1)

    collector.install(young_threshold=5_000)
    gc.callbacks.append(count)
    try:
        assert gc.get_threshold() == (5_000, *before[1:])
        gc.collect()  # counts start from zero
        young.clear()
        kept = [[i] for i in range(4_000)]  # 4,000 tracked lists, all alive: below the threshold
        assert young == []
        kept += [[i] for i in range(2_000)]  # past it: one young collection
        assert len(young) == 1
    finally:
        gc.callbacks.remove(count)
        collector.uninstall()
    assert gc.get_threshold() == before
    with pytest.raises(ValueError, match="young_threshold 0"):
        collector.install(young_threshold=0)
