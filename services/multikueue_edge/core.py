"""What the MultiKueue edge must write on the workers, from the manager's log and what it sees there.

Why this module exists: the edge is level-triggered. The log says, per manager workload, whether
it still needs remote copies (it holds quota, is not finished, evicted or deleted), which workers
the ``multikueue`` decider nominated (WorkersNominated) and which one won (RemoteAdmissionChosen);
the workers' watches say which copies exist. :func:`plan` compares the two and returns the
writes, so a restart, a lost write or a worker coming back converge to the same place
(SEMANTICS-ADVANCED E.2 4-5, E.2 8, E.3; Kueue workload.go reconcileGroup,
nominateAndSynchronizeWorkers, multikueuecluster.go runGC). No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kueue_es.events import types


@dataclass(frozen=True, kw_only=True)
class JobRef:
    """The manager's job behind a workload: ``apiVersion``, ``kind`` and name (same namespace)."""

    api_version: str
    kind: str
    name: str


@dataclass(frozen=True, kw_only=True)
class Priority:
    """A Workload's ``spec.priorityClassRef`` name (a WorkloadPriorityClass) and ``spec.priority``."""

    class_name: str
    value: int | None


@dataclass(frozen=True, kw_only=True)
class LocalWorkload:
    """One manager workload with a MultiKueue check, as the edge's fold of the log sees it.

    ``live``: it holds quota and is neither finished, evicted nor deleted (so its copies stay);
    ``nominated`` / ``nominated_seq``: the workers of the latest WorkersNominated and its log
    sequence; ``chosen`` / ``chosen_seq``: the winner of the latest RemoteAdmissionChosen ("" none);
    ``priority``: its WorkloadPriorityClass and ``spec.priority`` now (None: no WorkloadPriorityClass,
    nothing to keep in line on the workers); ``group``: the workers of its MultiKueue check's MultiKueueConfig
    (Kueue's wlGroup: reconcileGroup reads and writes those only), None when not known (every worker);
    ``stale_uids``: the worker UIDs of copies made for a nomination a Retry, an eviction or a release ended.
    """

    ref: types.WorkloadRef
    live: bool
    nominated: tuple[str, ...] = ()
    nominated_seq: int = 0
    chosen: str = ""
    chosen_seq: int = 0
    job: JobRef | None = None
    priority: Priority | None = None
    group: frozenset[str] | None = None
    stale_uids: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return self.ref.key


@dataclass(frozen=True, kw_only=True)
class CreateWorkload:
    """Create the remote copy of ``workload`` on ``cluster`` (for decision ``decision_seq``)."""

    cluster: str
    workload: types.WorkloadRef
    decision_seq: int
    action: str = "create-remote-workload"


@dataclass(frozen=True, kw_only=True)
class CreateJob:
    """Create the remote job of ``workload`` on the winning ``cluster`` (for RemoteAdmissionChosen ``decision_seq``)."""

    cluster: str
    workload: types.WorkloadRef
    job: JobRef
    decision_seq: int
    action: str = "create-remote-job"


@dataclass(frozen=True, kw_only=True)
class DeleteRemote:
    """Delete the remote copy of ``workload`` on ``cluster`` and the remote job it has (``job``, if known).

    ``why``: ``not-nominated``, ``lost-race`` (another worker admitted it), ``local-done`` (the
    manager's workload finished, lost its quota or was deleted), ``stale`` (a copy of a nomination a Retry or an
    eviction ended) or ``garbage`` (GC: no such workload on the manager). ``decision_seq`` 0 for GC.
    """

    cluster: str
    workload: types.WorkloadRef
    why: str
    decision_seq: int
    job: JobRef | None = None
    action: str = "delete-remote-workload"


@dataclass(frozen=True, kw_only=True)
class UpdatePriority:
    """Give the remote copy of ``workload`` on ``cluster`` the manager's WorkloadPriorityClass and priority
    (Kueue workload.go reconcileGroup step 5: a copy whose priority alone changed is updated, not deleted)."""

    cluster: str
    workload: types.WorkloadRef
    priority: Priority
    decision_seq: int
    action: str = "update-remote-workload-priority"


Action = CreateWorkload | CreateJob | DeleteRemote | UpdatePriority


@dataclass(frozen=True, kw_only=True)
class RemoteCopy:
    """One remote Workload of this origin as a worker's watch shows it (``uid``: the worker's; ``priority``:
    its class and ``spec.priority``, class name "" without one, None for a Pod PriorityClass)."""

    namespace: str
    name: str
    uid: str = ""
    admitted: bool = False
    has_job: bool = False
    priority: Priority | None = None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


@dataclass(kw_only=True)
class Plan:
    """The writes :func:`plan` asks for, in order: deletions first, then creations."""

    actions: list[Action] = field(default_factory=list)


def plan(
    locals_: Mapping[str, LocalWorkload],
    remote: Mapping[str, Mapping[str, RemoteCopy]],
    *,
    connected: Iterable[str],
    collect_garbage: bool = False,
    known: Iterable[str] = (),
) -> list[Action]:
    """The writes that bring the workers in line with the manager.

    ``locals_``: the manager workloads with a MultiKueue check, by ``namespace/name``;
    ``remote``: per connected worker, its remote Workloads of this origin by ``namespace/name``;
    ``connected``: the workers reachable now (nothing is written to another);
    ``collect_garbage``: also delete remote copies of workloads the manager does not know at all
    (``known``: every workload key on the manager's log, live or not; Kueue runs this GC every
    ``gcInterval``). Rules (SEMANTICS-ADVANCED E.2 4-5, 8, E.3):

    - a live workload with a winner: its copy stays on the winner (and its job is created there once
      the copy is admitted), every other copy goes (``lost-race``);
    - a live workload without a winner: a copy on every nominated connected worker, none elsewhere
      (``not-nominated``);
    - a copy made for an earlier nomination (its UID in ``stale_uids``): it goes (``stale``), live or not;
    - a workload that is not live: every copy goes (``local-done``);
    - a live workload's copy on a worker outside its ``group`` is not its to touch: Kueue's reconcileGroup sees the
      workers of the check's MultiKueueConfig only, and two MultiKueueClusters may reach one worker (each step of
      Kueue's e2e suite makes its own for the same kind clusters), where a copy seen through the other one is this
      very copy;
    - a copy that stays, of a workload with a WorkloadPriorityClass, whose class or priority differs from
      the manager's: updated to the manager's (``UpdatePriority``; Kueue's PriorityChanged).
    """
    up = set(connected)
    known_keys = set(known) | set(locals_)
    deletes: list[Action] = []
    creates: list[Action] = []
    updates: list[Action] = []
    for cluster in sorted(up):
        copies = remote.get(cluster) or {}
        for key in sorted(copies):
            copy = copies[key]
            local = locals_.get(key)
            if local is None:
                if collect_garbage and key not in known_keys:
                    ref = types.WorkloadRef(namespace=copy.namespace, name=copy.name)
                    deletes.append(DeleteRemote(cluster=cluster, workload=ref, why="garbage", decision_seq=0))
                continue
            if local.live and local.group is not None and cluster not in local.group:
                continue
            if copy.uid and copy.uid in local.stale_uids:
                # a copy of an earlier nomination (before a Retry or an eviction): it never serves this one
                deletes.append(_delete(local, cluster, "stale", max(local.chosen_seq, local.nominated_seq)))
            elif not local.live:
                deletes.append(_delete(local, cluster, "local-done", max(local.chosen_seq, local.nominated_seq)))
            elif local.chosen and cluster != local.chosen:
                deletes.append(_delete(local, cluster, "lost-race", local.chosen_seq))
            elif not local.chosen and cluster not in local.nominated:
                deletes.append(_delete(local, cluster, "not-nominated", local.nominated_seq))
            elif _priority_changed(local.priority, copy.priority):
                assert local.priority is not None
                seq = local.chosen_seq if local.chosen else local.nominated_seq
                updates.append(
                    UpdatePriority(cluster=cluster, workload=local.ref, priority=local.priority, decision_seq=seq)
                )
    for key in sorted(locals_):
        local = locals_[key]
        if not local.live:
            continue
        if local.chosen:
            won = (remote.get(local.chosen) or {}).get(key)
            if local.chosen in up and won is not None and won.admitted and not won.has_job and local.job is not None:
                creates.append(
                    CreateJob(cluster=local.chosen, workload=local.ref, job=local.job, decision_seq=local.chosen_seq)
                )
            continue
        for cluster in local.nominated:
            if cluster in up and key not in (remote.get(cluster) or {}):
                creates.append(CreateWorkload(cluster=cluster, workload=local.ref, decision_seq=local.nominated_seq))
    return deletes + updates + creates


def _priority_changed(local: Priority | None, copy: Priority | None) -> bool:
    """Whether a copy's priority is behind the manager's (Kueue pkg/workload PriorityChanged): only for a
    WorkloadPriorityClass (a Pod priority class is not updated), on a new class name or a new value."""
    if local is None or copy is None or local.value is None:
        return False  # a class without a priority: no update the worker would take
    return bool(local.class_name and local.class_name != copy.class_name) or local.value != copy.value


def _delete(local: LocalWorkload, cluster: str, why: str, seq: int) -> DeleteRemote:
    return DeleteRemote(cluster=cluster, workload=local.ref, why=why, decision_seq=seq, job=local.job)
