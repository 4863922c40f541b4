"""Fair sharing: dominant resource shares, the admission tournament and fair preemption.

(Being written: for now the classical order and targets.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from events import models
from projections.quota import QuotaTree
from services.preemptor import targets


def entry_order(entries: Iterable[Any], *, tree: QuotaTree) -> Iterator[Any]:
    from services.admitter.core import _entry_order

    yield from sorted(entries, key=_entry_order)


def fair_targets(
    tree: QuotaTree, pool: targets.CandidatePool, preemptor: targets.Preemptor, config: models.FairSharingConfig
) -> list[targets.Target]:
    return targets.classical_targets(tree, pool, preemptor)
