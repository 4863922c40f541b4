"""What must hold of a bench log however often its services were killed: the chaos bench's checks.

:class:`InvariantChecker` reads a log once, in sequence order (pure: the messages are
given to it, it keeps a fold of its own), and reports every :class:`Violation` of:

- ``unfinished``: every workload the log (or the harness, ``expected``) knows got a
  ``WorkloadFinished`` fact;
- ``quota_held_at_end``: at the end of the log no workload still holds quota (a finished
  workload's quota was released);
- ``double_reservation``: a workload never gets a ``QuotaReserved`` while it already holds
  one (no ``QuotaReleased`` between them). The fold ignores such a second reservation, so
  this is tracked apart from it, from the verified batches' own events;
- ``quota_overused``: after every verified decision batch, on the path from each
  ClusterQueue the batch reserved or released quota in up to the root of its cohort tree
  (the quota tree of :mod:`kueue_es.projections.quota`, kept by the fold), no node holds more
  of a flavor-resource than it may: a node with a ``borrowingLimit`` at most its subtree
  quota plus that limit, the root at most its subtree quota (lent quota included, kept
  quota of a ``lendingLimit`` left out, as Kueue's resource nodes count it: SEMANTICS §6);
- ``orphan_decision``: nothing on the log is a decision outside a verified batch
  (:mod:`kueue_es.projections.batches`: the fold's own rule; an incomplete batch at the
  end of the log included).

Replay (``kueue-es replay``: every decision re-run at its basis, the log complete) is
the sixth check; :func:`replay_violations` turns its report into violations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections import batches, quota
from kueue_es.projections.cluster import ClusterState, UnknownEventError, apply
from kueue_es.replay import ReplayReport

KINDS = (
    "unfinished",
    "quota_held_at_end",
    "double_reservation",
    "quota_overused",
    "orphan_decision",
    "replay",
)
"""The kinds of :class:`Violation`, in the order they are reported."""

SHOWN = 10
"""Violations of one kind listed in full by :func:`summary`; the rest are counted."""


@dataclass(frozen=True, kw_only=True)
class Violation:
    """One broken invariant: its kind (one of :data:`KINDS`), the log sequence where it shows (0: at the
    end of the log), and what exactly is wrong."""

    kind: str
    seq: int
    detail: str

    def __str__(self) -> str:
        where = f"#{self.seq}" if self.seq else "at the end"
        return f"{self.kind} {where}: {self.detail}"


@dataclass(kw_only=True)
class InvariantChecker:
    """Checks a log fed message by message (:meth:`feed`, sequences increasing), then :meth:`finish`.

    ``expected``: workload keys (``namespace/name``) the harness created; each must appear
    on the log and finish (without it, the workloads the log observed). Holds the fold state,
    the keys seen, finished and holding quota: a few hundred bytes per workload.
    """

    expected: Iterable[str] = ()
    state: ClusterState = field(default_factory=ClusterState)
    violations: list[Violation] = field(default_factory=list)
    batches_folded: int = 0  # verified decision batches folded (each one's quota checked)
    messages: int = 0
    last_seq: int = 0
    _observed: dict[str, int] = field(default_factory=dict)  # workload key -> seq of its first WorkloadObserved
    _finished: set[str] = field(default_factory=set)
    _holding: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> (ClusterQueue, QuotaReserved seq)

    def feed(self, message: LogMessage) -> None:
        """Fold one message through the batch verifier and check what it released."""
        self.messages += 1
        self.last_seq = max(self.last_seq, message.seq)
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError:
            event = None
        verdict = self.state.batches.offer(
            seq=message.seq,
            subject=message.subject,
            msg_id_header=message.headers.get("Nats-Msg-Id", ""),
            data=message.data,
            event=event,
        )
        self._orphans(verdict.orphans)
        touched: dict[str, None] = {}
        batch = False
        for seq, accepted in ((seq, one) for seq, event in verdict.accepted for one in types.unbatched(event)):
            self._observe(seq, accepted, touched)
            batch = batch or isinstance(accepted, types.DecisionRecord)
            try:
                apply(self.state, accepted, seq=seq)
            except UnknownEventError:
                pass  # a type the fold does not know changes nothing it checks
        if batch:
            self.batches_folded += 1
            self._check_quota(touched, seq=message.seq)

    def finish(self, *, last_seq: int = 0) -> list[Violation]:
        """Close the log (``last_seq``: the stream's last sequence, for a batch it ends inside) and
        return every violation, by kind (:data:`KINDS`) then sequence."""
        self._orphans(self.state.batches.expire(max(last_seq, self.last_seq)).orphans)
        expected = list(dict.fromkeys(self.expected)) or list(self._observed)
        for key in expected:
            if key not in self._observed:
                self._add("unfinished", 0, f"workload {key} was never observed on the log")
            elif key not in self._finished:
                self._add("unfinished", 0, f"workload {key} (observed #{self._observed[key]}) never finished")
        for key, (cq, seq) in self._holding.items():
            self._add("quota_held_at_end", 0, f"workload {key} still holds the quota of {cq} reserved at #{seq}")
        order = {kind: i for i, kind in enumerate(KINDS)}
        return sorted(self.violations, key=lambda v: (order.get(v.kind, len(KINDS)), v.seq))

    # --- the checks ---------------------------------------------------------------------------

    def _add(self, kind: str, seq: int, detail: str) -> None:
        self.violations.append(Violation(kind=kind, seq=seq, detail=detail))

    def _orphans(self, orphans: Iterable[batches.Orphan]) -> None:
        for orphan in orphans:
            self._add("orphan_decision", orphan.seq, f"{orphan.subject}: {orphan.reason} ({orphan.detail})")

    def _observe(self, seq: int, event: types.Event, touched: dict[str, None]) -> None:
        match event:
            case types.WorkloadObserved(workload=workload):
                self._observed.setdefault(workload.key, seq)
            case types.WorkloadFinished(workload=ref):
                self._finished.add(ref.key)
            case types.QuotaReserved(workload=ref, cluster_queue=cq):
                held = self._holding.get(ref.key)
                if held is not None:
                    self._add(
                        "double_reservation",
                        seq,
                        f"workload {ref.key} reserved in {cq} while holding the quota of {held[0]} reserved"
                        f" at #{held[1]} (no QuotaReleased between)",
                    )
                else:
                    self._holding[ref.key] = (cq, seq)
                touched[cq] = None
            case types.WorkloadAdmitted(workload=ref, cluster_queue=cq):
                if types.reserves(event, ref.key in self._holding):  # reserved and admitted by one message
                    self._holding[ref.key] = (cq, seq)
                    touched[cq] = None
            case types.QuotaReleased(workload=ref):
                held = self._holding.pop(ref.key, None)
                if held is not None:
                    touched[held[0]] = None

    def _check_quota(self, touched: dict[str, None], *, seq: int) -> None:
        """No node on the paths from ``touched`` ClusterQueues to their roots holds more than it may."""
        if not touched:
            return
        tree = quota.cached(self.state)
        seen: set[int] = set()
        for cq in touched:
            node: quota.Node | None = tree.cluster_queues.get(cq)
            while node is not None and id(node) not in seen:
                seen.add(id(node))
                for problem in overuse(node):
                    self._add("quota_overused", seq, problem)
                node = node.parent


def overuse(node: quota.Node) -> list[str]:
    """What ``node`` holds beyond what it may, one line per flavor-resource (empty when within its limits).

    A node with a parent may hold its subtree quota plus its ``borrowingLimit`` (no limit
    without one); a root, ClusterQueue or cohort, its subtree quota. Amounts as the tree
    keeps them (cpu in millicores, memory in bytes). Kueue: resource_node.go's available().
    """
    what = "cohort" if node.is_cohort else "ClusterQueue"
    problems = []
    for fr, used in node.usage.items():
        if used <= 0:
            continue
        subtree = node.subtree.get(fr, 0)
        limit: int | None
        if node.parent is None:
            limit, why = subtree, "its subtree quota"
        else:
            spec = node.quotas.get(fr)
            if spec is None or spec.borrowing_limit is None:
                continue
            limit, why = subtree + spec.borrowing_limit, f"its quota {subtree} + borrowingLimit {spec.borrowing_limit}"
        if used > limit:
            problems.append(f"{what} {node.name} holds {used} of {fr[0]}/{fr[1]}, more than {why} ({limit})")
    return problems


def replay_violations(report: ReplayReport) -> list[Violation]:
    """The replay check as violations: one per difference, gap, orphan, dispatch result of no decision
    and record replay could not re-check (a bench log has no seeds: every record must re-run)."""
    out = [
        Violation(kind="replay", seq=m.seq, detail=f"decision {m.decision_id} differs when re-run at its basis")
        for m in report.mismatches
    ]
    out += [
        Violation(kind="replay", seq=first, detail=f"sequences {first}..{last} are missing from the log")
        for first, last in report.gaps
    ]
    out += [
        Violation(kind="replay", seq=o.seq, detail=f"orphan {o.type} on {o.subject}: {o.why}") for o in report.orphans
    ]
    out += [
        Violation(kind="replay", seq=o.seq, detail=f"dispatch result of no decision on {o.subject}: {o.why}")
        for o in report.stray_dispatch
    ]
    out += [
        Violation(kind="replay", seq=u.head_seq, detail=f"record {u.decision_id} not re-checked: {u.why}")
        for u in report.unverifiable
    ]
    return out


def summary(violations: list[Violation], *, shown: int = SHOWN) -> list[str]:
    """Lines for a terminal: per kind, the first ``shown`` violations, then how many more."""
    lines: list[str] = []
    for kind in KINDS:
        of_kind = [v for v in violations if v.kind == kind]
        lines += [str(v) for v in of_kind[:shown]]
        if len(of_kind) > shown:
            lines.append(f"{kind}: ... and {len(of_kind) - shown} more")
    return lines
