"""Admission fair sharing: the usage each LocalQueue has consumed, decayed over time.

Kueue's AdmissionFairSharing (SEMANTICS §8; pkg/util/admissionfairsharing/
admission_fair_sharing.go, pkg/cache/queue/afs/usage_ledger.go) orders the
LocalQueues of a ClusterQueue whose ``admissionScope.admissionMode`` is
``UsageBasedAdmissionFairSharing`` by what they consumed recently: an
exponentially decayed average of their admitted usage, with half-life
``usageHalfLifeTime``, plus an entry penalty for each admission.

Kueue samples the average every ``usageSamplingInterval`` and at each admission.
Between two changes of a LocalQueue's admitted usage the decay has a closed form
(``consumed(t) = admitted + (consumed(t0) - admitted) * 0.5^((t - t0) / halfLife)``,
which composes exactly over any split of the interval), so here the ledger is
updated only when the admitted usage changes (admission, release), with the
decision's own time, and read at the cycle's clock: no timer, same values at every
sampling point. Values are floats in Kueue's units: cpu in cores, everything else
in its base unit (memory in bytes), flavors summed per resource name.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from kueue_es.events import models, quantities

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration_seconds(text: str) -> float:
    """Seconds in a Go duration string such as ``168h``, ``5m``, ``1h30m`` or ``0s``.

    Raises ValueError for anything else (the Configuration keeps Go's format).
    """
    if text in ("0", ""):
        return 0.0
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(text) or position == 0:
        raise ValueError(f"not a Go duration: {text!r}")
    return total


def alpha(elapsed_s: float, half_life_s: float) -> float:
    """Kueue's calculateAlphaRate: the weight of the new sample after ``elapsed_s``."""
    if half_life_s == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed_s / half_life_s)


def as_float(resource: str, amount: int) -> float:
    """An integer amount in Kueue's float units (cpu millicores -> cores)."""
    return amount / 1000.0 if resource == "cpu" else float(amount)


@dataclass
class Ledger:
    """One LocalQueue's consumed usage at ``last_ms`` and the admitted usage since then.

    ``pending``: the entry penalties not settled yet, per workload key (Kueue's penalty records,
    pkg/cache/queue/afs/usage_ledger.go): pushed when the workload reserves quota, settled into
    ``consumed`` when it is admitted (its admission checks Ready), dropped when it can no longer be
    (deleted, finished, moved to another LocalQueue, deactivated without quota). They do not decay."""

    consumed: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    last_ms: int = 0
    pending: dict[str, dict[str, float]] = field(default_factory=dict)
    carried: dict[str, float] = field(default_factory=dict)
    """The history from before the LocalQueue was deleted and created again, at ``carried_ms``: Kueue drops
    a deleted LocalQueue's ledger entry and seeds the new one empty, never from the live admitted usage
    (localqueue_controller.go Delete and initializeAfsIfNeeded, Kueue PR #12891). ``consumed`` keeps it, as
    the deciders before that was followed read it (admitter logic 47, preemptor 19); :meth:`fresh` takes it
    out, decayed as ``consumed`` decays."""
    carried_ms: int = 0
    dropped: set[str] = field(default_factory=set)
    """The workloads of ``pending`` whose penalty records went with the deleted LocalQueue's entry: they
    count in no pending usage, and their admission settles no penalty (it goes to ``carried``)."""

    def decayed(self, now_ms: int, half_life_s: float) -> dict[str, float]:
        """``consumed`` decayed to ``now_ms`` towards the admitted usage (no mutation)."""
        if half_life_s == 0:
            return {}  # a zero half-life keeps no history (SEMANTICS §8)
        weight = alpha(max(0, now_ms - self.last_ms) / 1000.0, half_life_s)
        out: dict[str, float] = {}
        for resource in sorted({*self.consumed, *self.admitted}):
            old = self.consumed.get(resource, 0.0)
            new = as_float(resource, self.admitted.get(resource, 0))
            out[resource] = old * (1.0 - weight) + new * weight
        return out

    def advance(self, now_ms: int, half_life_s: float) -> None:
        """Fold the decay up to ``now_ms`` into ``consumed`` (before the admitted usage changes)."""
        if now_ms >= self.last_ms:
            self.consumed = self.decayed(now_ms, half_life_s)
            self.last_ms = now_ms

    def fresh(self, now_ms: int, half_life_s: float) -> dict[str, float]:
        """:meth:`decayed` without the :attr:`carried` history (decayed to ``now_ms`` too, towards
        nothing), never below zero: the consumed usage of the LocalQueue as it exists now."""
        values = self.decayed(now_ms, half_life_s)
        if not self.carried or not values:
            return values
        keep = 1.0 - alpha(max(0, now_ms - self.carried_ms) / 1000.0, half_life_s)
        for resource, amount in self.carried.items():
            if resource in values:
                values[resource] = max(0.0, values[resource] - amount * keep)
        return values

    def recreated(self, at_ms: int, half_life_s: float | None) -> None:
        """The LocalQueue was created again at ``at_ms`` (after a deletion): all its history so far is
        :attr:`carried`, and its pending penalty records are :attr:`dropped` (``half_life_s`` None:
        admission fair sharing off, the history taken as it stands at ``last_ms``)."""
        if half_life_s is None:
            self.carried, self.carried_ms = dict(self.consumed), self.last_ms
        else:
            at_ms = max(at_ms, self.last_ms)
            self.carried, self.carried_ms = self.decayed(at_ms, half_life_s), at_ms
        self.dropped = set(self.pending)

    def carry(self, penalty: dict[str, float], at_ms: int, half_life_s: float) -> None:
        """A dropped workload's entry penalty settled at ``at_ms``: :meth:`fresh` leaves it out too."""
        keep = 1.0 - alpha(max(0, at_ms - self.carried_ms) / 1000.0, half_life_s)
        carried = {r: v * keep for r, v in self.carried.items()}
        for resource, amount in penalty.items():
            carried[resource] = carried.get(resource, 0.0) + amount
        self.carried, self.carried_ms = carried, max(at_ms, self.carried_ms)


def active(cq: models.ClusterQueue | None, config: models.Configuration) -> bool:
    """Whether admission fair sharing orders ``cq``'s LocalQueues (SEMANTICS §8)."""
    return (
        cq is not None
        and config.admission_fair_sharing is not None
        and config.feature_gates.get("AdmissionFairSharing", True)
        and cq.spec.admission_scope is not None
        and cq.spec.admission_scope.admission_mode == "UsageBasedAdmissionFairSharing"
    )


def half_life_s(config: models.Configuration) -> float:
    """``usageHalfLifeTime`` in seconds."""
    assert config.admission_fair_sharing is not None
    return go_duration_seconds(config.admission_fair_sharing.usage_half_life_time)


def entry_penalty(requests: dict[str, int], config: models.Configuration) -> dict[str, float]:
    """Kueue's CalculateEntryPenalty: alpha(sampling interval) x the workload's total requests."""
    afs = config.admission_fair_sharing
    assert afs is not None
    rate = alpha(go_duration_seconds(afs.usage_sampling_interval), go_duration_seconds(afs.usage_half_life_time))
    return {r: as_float(r, v) * rate for r, v in sorted(requests.items())}


def usage_value(
    ledger: Ledger | None,
    *,
    now_ms: int,
    config: models.Configuration,
    lq: models.LocalQueue | None,
    pending: bool = False,
) -> float:
    """Kueue's CalculateUsage: sum over resources of weight x (consumed + pending penalties), over the
    LocalQueue's weight (default 1; zero or less is infinite). ``pending`` False leaves the penalties of
    workloads reserved but not admitted yet out, as admitter logic 28 and earlier did (for replay). The
    consumed usage is :meth:`Ledger.fresh` (what a LocalQueue deleted and created again carried over is
    not counted, nor the penalties its deletion dropped); the deciders before that was followed see ledgers
    without them (:func:`with_history_kept`)."""
    afs = config.admission_fair_sharing
    assert afs is not None
    weight = 1.0
    if lq is not None and lq.spec.fair_sharing is not None:
        weight = _quantity(lq.spec.fair_sharing.weight)
    if weight <= 0:
        return math.inf
    if ledger is None:
        return 0.0
    values = ledger.fresh(now_ms, half_life_s(config))
    if pending and ledger.pending:
        for key, penalty in ledger.pending.items():
            if key in ledger.dropped:
                continue
            for resource, amount in penalty.items():
                values[resource] = values.get(resource, 0.0) + amount
    total = 0.0
    for resource, value in sorted(values.items()):
        factor = _quantity(afs.resource_weights[resource]) if resource in afs.resource_weights else 1.0
        total += factor * value
    return total / weight


def _quantity(text: str) -> float:
    return float(quantities.parse_decimal(text))


def with_history_kept(ledgers: dict[tuple[str, str], Ledger]) -> dict[tuple[str, str], Ledger]:
    """``ledgers`` as admitter logic 47 and preemptor logic 19 and earlier read them (for replay): a
    LocalQueue deleted and created again keeps its history and its pending penalties (copies without
    :attr:`Ledger.carried` and :attr:`Ledger.dropped`); ``ledgers`` itself when no LocalQueue was."""
    if not any(ledger.carried or ledger.dropped for ledger in ledgers.values()):
        return ledgers
    return {
        key: (dataclasses.replace(ledger, carried={}, dropped=set()) if ledger.carried or ledger.dropped else ledger)
        for key, ledger in ledgers.items()
    }
