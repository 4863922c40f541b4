"""The outcome of a scenario run: who is admitted where, who waits, who was preempted.

Every engine reduces its run to an :class:`Outcome` with :func:`build_outcome`
(the final :class:`~kueue_es.projections.cluster.ClusterState` and the event log), so two
engines are compared on the same terms. Only the result is in it, nothing about
how it was reached (no cycle counts, no sequences).

:func:`preempted_keys` counts a workload as preempted when the log holds an
EvictionRequested about it, or a QuotaReleased whose reason is ``Preempted``
(Kueue's eviction reason). A workload being evicted (EvictionRequested, quota not
yet released) is not admitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kueue_es.events import types
from kueue_es.events.tas import decode, domain_id
from kueue_es.projections.cluster import ClusterState, WorkloadState, apply

PREEMPTED_RELEASE_REASONS = frozenset({"Preempted"})


@dataclass(frozen=True, kw_only=True)
class PodSetOutcome:
    """An admitted pod set: flavor per resource, admitted pod count, and (TAS) pods per node."""

    flavors: Mapping[str, str]
    count: int
    topology: Mapping[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, README shape: ``{flavors: {cpu: default}, count: 3}`` (+ ``topology``)."""
        out: dict[str, Any] = {"flavors": dict(self.flavors), "count": self.count}
        if self.topology is not None:
            out["topology"] = dict(self.topology)
        return out


@dataclass(frozen=True, kw_only=True)
class AdmittedOutcome:
    """Where an admitted workload holds quota, per pod set."""

    cluster_queue: str
    pod_sets: Mapping[str, PodSetOutcome]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict: ``{clusterQueue: cq, podSets: {main: {...}}}``."""
        return {"clusterQueue": self.cluster_queue, "podSets": {n: p.to_dict() for n, p in self.pod_sets.items()}}


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """The end of a run; every key is ``namespace/name``, every list sorted.

    ``admitted``: workloads admitted at the end (holding quota, every admission check
    Ready; finished ones excluded); ``reserved``: holding quota but still waiting for
    admission checks (Kueue's QuotaReserved=True, Admitted=False);
    ``pending``: submitted, holding no quota, not finished, not deleted;
    ``preempted``: evicted by preemption at some point of the run (may also be
    pending or admitted again); ``finished`` and ``deleted``: gone by the end;
    ``why``: for pending workloads, the last reason the admitter recorded (Kueue's
    QuotaReserved=False message), so a person can see why.
    """

    admitted: Mapping[str, AdmittedOutcome] = field(default_factory=dict)
    reserved: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    preempted: tuple[str, ...] = ()
    finished: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    why: Mapping[str, str] = field(default_factory=dict)
    multikueue: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """MultiKueue (ours): per workload with either, its ``(status.clusterName, status.nominatedClusterNames)``."""

    def status(self, key: str) -> str:
        """One word or phrase for ``key``: ``admitted to <cq>``, ``pending``, ``finished``,
        ``deleted`` or ``not submitted``."""
        if key in self.admitted:
            return f"admitted to {self.admitted[key].cluster_queue}"
        if key in self.reserved:
            return "quota reserved, waiting for admission checks"
        for word, keys in (("pending", self.pending), ("finished", self.finished), ("deleted", self.deleted)):
            if key in keys:
                return word
        return "not submitted"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON or YAML output (the ``scenario run`` output)."""
        return {
            "admitted": {k: self.admitted[k].to_dict() for k in sorted(self.admitted)},
            "reserved": list(self.reserved),
            "preempted": list(self.preempted),
            "pending": list(self.pending),
            "finished": list(self.finished),
            "deleted": list(self.deleted),
            "why": dict(self.why),
            **(
                {
                    "multikueue": {
                        k: {"clusterName": c, "nominated": list(n)} for k, (c, n) in sorted(self.multikueue.items())
                    }
                }
                if self.multikueue
                else {}
            ),
        }


def build_outcome(
    *, submitted: Iterable[str], log: Sequence[tuple[int, types.Event]], state: ClusterState | None = None
) -> Outcome:
    """The outcome of a run from its event ``log`` (``(seq, event)`` in order).

    ``submitted`` are the ``ns/name`` of every workload the scenario submitted;
    ``state`` is the fold of ``log`` (folded here when not given).
    """
    if state is None:
        state = ClusterState()
        for seq, event in log:
            for one in _with_decisions(event):
                apply(state, one, seq=seq)
    holding = {
        key: wl
        for key, wl in state.workloads.items()
        if wl.reservation is not None and not wl.gone and wl.eviction is None
    }
    admitted = {key: _admitted(wl, placed_pods(wl)) for key, wl in holding.items() if wl.admitted}
    reserved = [key for key, wl in holding.items() if not wl.admitted]
    pending, finished, deleted = [], [], []
    why: dict[str, str] = {}
    for key in dict.fromkeys(submitted):
        wl = state.workloads.get(key)
        if wl is None or wl.deleted_seq:
            deleted.append(key)
        elif wl.finished is not None:
            finished.append(key)
        elif key not in holding:
            pending.append(key)
            if wl.pending_message:
                why[key] = wl.pending_message
    return Outcome(
        admitted=dict(sorted(admitted.items())),
        reserved=tuple(sorted(reserved)),
        pending=tuple(sorted(pending)),
        preempted=tuple(sorted(preempted_keys(event for _, event in log))),
        finished=tuple(sorted(finished)),
        deleted=tuple(sorted(deleted)),
        why=dict(sorted(why.items())),
        multikueue=_multikueue(state, submitted),
    )


def _multikueue(state: ClusterState, submitted: Iterable[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``(clusterName, nominated clusters)`` of each submitted workload that has either."""
    mk = state.multikueue
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for key in dict.fromkeys(submitted):
        nomination = mk.nominations.get(key)
        nominated = tuple(nomination.clusters) if nomination is not None else ()
        if key in mk.cluster_names or nominated:
            out[key] = (mk.cluster_names.get(key, ""), nominated)
    return dict(sorted(out.items()))


def _with_decisions(event: Any) -> list[Any]:
    """``event``, and for a DecisionRecord the decisions it carries (event schema 17), in order after it, as
    their own messages followed it before."""
    if isinstance(event, types.DecisionRecord) and event.decisions:
        return [event, *event.carried]
    return [event]


def preempted_keys(events: Iterable[object]) -> set[str]:
    """``ns/name`` of every workload a preemption decision in ``events`` evicted (see module doc): a
    decision of its own message or one a DecisionRecord carries (event schema 17)."""
    found: set[str] = set()
    for event in (one for each in events for one in _with_decisions(each)):
        if isinstance(event, types.EvictionRequested) and event.reason in PREEMPTED_RELEASE_REASONS:
            found.add(event.workload.key)
        elif isinstance(event, types.QuotaReleased) and event.reason in PREEMPTED_RELEASE_REASONS:
            found.add(event.workload.key)
    return found


def placed_pods(wl: WorkloadState) -> dict[str, dict[str, int]]:
    """Per pod set, pods per node (or per joined domain values when the topology's lowest level
    is not hostname) of ``wl``'s topology assignment as the fold holds it: every TopologyAssigned
    of its reservation merged per pod set (A.2.2), so a second pass that places only the delayed
    pod sets (A.9) keeps the pod sets placed in the first pass."""
    return {
        name: {domain_id(d.values): d.count for d in decode(ta).domains} for name, ta in (wl.topology or {}).items()
    }


def _admitted(wl: WorkloadState, placed: Mapping[str, Mapping[str, int]]) -> AdmittedOutcome:
    assert wl.reservation is not None
    return AdmittedOutcome(
        cluster_queue=wl.reservation.cluster_queue,
        pod_sets={
            psa.name: PodSetOutcome(
                flavors=dict(sorted(psa.flavors.items())),
                count=psa.count,
                topology=dict(sorted(placed[psa.name].items())) if psa.name in placed else _topology(psa),
            )
            for psa in wl.reservation.pod_set_assignments
        },
    )


def _topology(assignment: types.PodSetAssignment) -> Mapping[str, int] | None:
    """Pods per node of a TAS assignment, once the event carries one (``topology``: node -> pods)."""
    topology = getattr(assignment, "topology", None)
    return dict(sorted(topology.items())) if isinstance(topology, Mapping) else None
