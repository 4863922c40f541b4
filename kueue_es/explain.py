"""``kueue-es explain``, ``list`` and ``status``: answers from the log, as of now or as of ``--at``.

Each reads the log of a running system (``--nats`` or :func:`kueue_es.current.find`), of a stopped one
(``--store DIR``) or a JSON-lines file (``--file``), folds it up to ``--at SEQ|RFC3339``
(:mod:`kueue_es.logsource`) and prints rich tables, or ``-o json`` / ``-o yaml`` for tools.

- ``explain NAMESPACE/NAME``: a Workload's story (:class:`kueue_es.scheduling.explain.StoryCollector`),
  its position in its LocalQueue and ClusterQueue (:func:`kueue_es.scheduling.visibility.position_of`)
  and, while it waits, what it would take to fit (:func:`kueue_es.scheduling.explain.needs`). NAME may
  be the Workload's or the job's that owns it; its partition, and why it waits when a hand-over into it
  is under way or no decider has committed in it. A job (or other object) of that name with no Workload
  that the log holds an ObjectRejected for: its rejections (field, problem) and whether one still stands
  (:func:`rejection_report`). Exit 1 when the log names no such workload and no such rejection.
- ``list clusterqueue|localqueue|workload|resourceflavor``: kueuectl's columns (cmd/kueuectl/app/list).
- ``status``: per ClusterQueue, its partition (and a hand-over under way), usage against quota per flavor
  and resource, pending (active and inadmissible) and admitted workloads; the cohorts and their members;
  the partitions with their last DecisionRecord and hand-overs (docs/design.md Partitions).

Exit codes: 0 done; 1 no such workload nor rejection (explain); 2 the log cannot be read or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Imported where used: the parser is built for every kueue-es command, and these pull in the fold.
if TYPE_CHECKING:
    from kueue_es import logsource
    from kueue_es.projections.cluster import ClusterState, WorkloadState
    from kueue_es.scheduling import explain as core

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2

KINDS = {
    "clusterqueue": "clusterqueue",
    "clusterqueues": "clusterqueue",
    "cq": "clusterqueue",
    "localqueue": "localqueue",
    "localqueues": "localqueue",
    "lq": "localqueue",
    "workload": "workload",
    "workloads": "workload",
    "wl": "workload",
    "resourceflavor": "resourceflavor",
    "resourceflavors": "resourceflavor",
    "rf": "resourceflavor",
}


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """``--nats``, ``--store``, ``--file``, ``--at``, ``--progress``: where the log is and up to when."""
    where = parser.add_argument_group("the log (default: the running system, see kueue_es/current.py)")
    where.add_argument("--nats", default=None, help="NATS URL of a running system")
    where.add_argument("--store", type=Path, default=None, help="a stopped system's nats store directory")
    where.add_argument("--file", type=Path, default=None, help="a log file of JSON lines")
    where.add_argument(
        "--at",
        default=None,
        metavar="SEQ|RFC3339",
        help="fold the log only up to this sequence, or to the last message at or before this time",
    )
    where.add_argument(
        "--progress", action="store_true", help="a progress bar on stderr even when it is not a terminal"
    )


def add_commands(sub: Any) -> None:
    """The ``explain``, ``list`` and ``status`` subcommands (for ``kueue-es`` and ``kubectl kueue``)."""
    explain = sub.add_parser("explain", help="a workload's story from the log, its position, and what it waits for")
    explain.add_argument("target", metavar="NAMESPACE/NAME", help="a Workload, or the Job (JobSet, Pod...) owning it")
    explain.add_argument(
        "-n", "--namespace", default=None, help="the namespace of a bare NAME (default: default), as kubectl's -n"
    )
    explain.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_source_options(explain)
    explain.set_defaults(run=run_explain)

    listing = sub.add_parser("list", help="ClusterQueues, LocalQueues, Workloads or ResourceFlavors from the log")
    listing.add_argument(
        "kind", choices=sorted(KINDS), metavar="KIND", help="clusterqueue|localqueue|workload|resourceflavor"
    )
    listing.add_argument("-n", "--namespace", default="default", help="namespace of LocalQueues and Workloads")
    listing.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    listing.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    filters = listing.add_argument_group("kueuectl's filters")
    filters.add_argument(
        "-c", "--clusterqueue", default="", help="LocalQueues of, Workloads admitted to, this ClusterQueue"
    )
    filters.add_argument("-q", "--localqueue", default="", help="Workloads of this LocalQueue")
    filters.add_argument(
        "--status",
        action="append",
        default=[],
        help='Workloads by status: "all", "pending", "quotareserved", "admitted" or "finished" (repeatable)',
    )
    filters.add_argument("--active", action="append", default=[], help="ClusterQueues whose Active is true|false")
    add_source_options(listing)
    listing.set_defaults(run=run_list)

    status = sub.add_parser("status", help="per ClusterQueue: usage against quota, pending and admitted; cohorts")
    status.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text")
    add_source_options(status)
    status.set_defaults(run=run_status)


# --- opening the log ---------------------------------------------------------------------------------


class _Refused(Exception):
    """An argument error or an unreadable log: the message is printed, exit 2."""


def source_of(args: argparse.Namespace) -> logsource.Source:
    """The log the options name: ``--store``, ``--file``, else the running system (``--nats`` or
    :func:`kueue_es.current.find`). Raises _Refused naming the problem."""
    from kueue_es import current, logsource

    given = [x for x in (args.nats, args.store, args.file) if x is not None]
    if len(given) > 1:
        raise _Refused("give at most one of --nats URL, --store DIR and --file FILE")
    if args.store is not None:
        return logsource.Source(store=args.store)
    if args.file is not None:
        return logsource.Source(file=args.file)
    try:
        system = current.find(args.nats)
    except current.NoSystemError as err:
        raise _Refused(str(err)) from None
    if note := current.choice_note(system):
        print(f"note: {note}", file=sys.stderr)
    return logsource.Source(nats_url=system.nats_url, credentials=system.credentials, origin=system.origin)


def _fold(
    args: argparse.Namespace,
    *,
    observer: logsource.Observer | None = None,
    from_start: bool = False,
    on_start: Any = None,
    on_message: logsource.MessageHook | None = None,
) -> logsource.Folded:
    from kueue_es import logsource

    at = None
    if args.at is not None:
        try:
            at = logsource.parse_at(args.at)
        except ValueError as err:
            raise _Refused(str(err)) from None
    source = source_of(args)
    try:
        folded = logsource.fold_source(
            source,
            at=at,
            observer=observer,
            from_start=from_start,
            progress=True if args.progress else None,
            on_start=on_start,
            on_message=on_message,
        )
    except logsource.LogSourceError as err:
        raise _Refused(str(err)) from None
    if at is not None and at.seq is not None and not folded.folder.stopped and at.seq > folded.last_seq:
        folded.notes.append(
            f"--at {at.seq} is past the end of the log (its last message is #{folded.last_seq}): read to its end"
        )
    if note := _before_the_log(folded, at):
        folded.notes.append(note)
    return folded


def _before_the_log(folded: logsource.Folded, at: logsource.At | None) -> str:
    """The note for an ``--at`` time before every time of a log folded from #1 (else ""): nothing of the log,
    or only messages that carry no time, is folded, so "no Workload" or an empty list would mislead."""
    from kueue_es import logsource

    folder = folded.folder
    if at is None or at.ms is None or folder.stopped_at is None or folded.start_seq or folder.last_ms:
        return ""
    seq, ms = folder.stopped_at
    first = f"#{seq} at {logsource.rfc3339(ms)}"
    if not folder.read:
        return f"--at {at.text} is before the log's first message ({first}): nothing of the log is folded"
    untimed = (
        "message before it, which carries no time, is"
        if folder.read == 1
        else (f"{folder.read} messages before it, which carry no time, are")
    )
    return f"--at {at.text} is before the log's first time ({first}): only the {untimed} folded"


def _guarded(run: Any) -> Any:
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return int(run(args))
        except _Refused as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_USAGE

    wrapper.__doc__ = run.__doc__
    return wrapper


def _as_of(folded: logsource.Folded, args: argparse.Namespace) -> str:
    from kueue_es import logsource

    folder = folded.folder
    when = logsource.rfc3339(folder.last_ms)
    through = folder.state.last_seq
    text = f"log read through #{through}" + (f" ({when})" if when else "")
    if args.at is not None:
        text += f", --at {args.at}"
    elif folded.last_seq:
        text += f" of #{folded.last_seq}"
    return text


def _print_notes(folded: logsource.Folded) -> None:
    for note in folded.notes:
        print(f"note: {note}", file=sys.stderr)


def _console() -> Any:
    """A rich console on stdout: the terminal's width ($COLUMNS when set), or wide enough for tables when piped."""
    import os

    from rich.console import Console

    return Console(soft_wrap=False, width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 240)


def _dump(value: Any, output: str) -> None:
    if output == "json":
        print(json.dumps(value, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(value, sort_keys=False), end="")


# --- explain ---------------------------------------------------------------------------------------------


@_guarded
def run_explain(args: argparse.Namespace) -> int:
    """``kueue-es explain NAMESPACE/NAME``."""
    from kueue_es import logsource
    from kueue_es.scheduling import explain as core

    namespace, name = explain_target(args.target, args.namespace)
    collector = core.StoryCollector(namespace=namespace, name=name)
    folded = _fold(
        args,
        observer=collector.observe,
        from_start=True,
        on_start=collector.start_from,
        on_message=lambda message: collector.stored_at(message.time_ms),
    )
    _print_notes(folded)
    state = folded.state
    key = _chosen(collector, state, f"{namespace}/{name}")
    if key is None and collector.rejections:  # no Workload, but the log says why: a job (or object) refused
        report = rejection_report(collector, state)
        report["asOf"] = {"seq": state.last_seq, "time": logsource.rfc3339(folded.now_ms), "at": args.at}
        if args.output == "json":
            print(json.dumps(report, indent=2))
        else:
            _render_rejections(report, as_of=_as_of(folded, args))
        return 0
    if key is None:
        print(
            f"error: the log names no Workload {namespace}/{name} and no Workload owned by a job {namespace}/{name}"
            f" ({_as_of(folded, args)})",
            file=sys.stderr,
        )
        if "/" in args.target and namespace.lower() in _KIND_WORDS:
            print(
                f"hint: explain takes NAMESPACE/NAME, not TYPE/NAME: {args.target!r} is the name {name!r} in a "
                f"namespace {namespace!r}; for the job {name} in namespace default give default/{name} (or {name})",
                file=sys.stderr,
            )
        return EXIT_NOT_FOUND
    now_ms = folded.now_ms
    report = explanation(collector, state, key, now_ms=now_ms)
    report["asOf"] = {"seq": state.last_seq, "time": logsource.rfc3339(now_ms), "at": args.at}
    if args.output == "json":
        print(json.dumps(report, indent=2))
        return 0
    _render_explanation(report, as_of=_as_of(folded, args))
    return 0


#: Kind words a user may put before a name (``job/NAME``, as kubectl's TYPE/NAME): explain's form is NAMESPACE/NAME.
_KIND_WORDS = frozenset(
    {"job", "jobs", "job.batch", "jobset", "jobsets", "pod", "pods", "workload", "workloads", "wl", "kwl"}
    | {"rayjob", "rayjobs", "raycluster", "rayclusters", "mpijob", "pytorchjob", "deployment", "statefulset"}
)


def explain_target(target: str, namespace: str | None) -> tuple[str, str]:
    """``(namespace, name)`` of explain's TARGET: ``NAMESPACE/NAME``, or a bare NAME in ``namespace`` (``-n``,
    default ``default``). Raises _Refused for an empty part, a third part, or a ``-n`` other than the
    target's namespace."""
    ns, slash, name = target.partition("/")
    if not slash:
        ns, name = namespace or "default", target
    if not ns or not name or "/" in name:
        raise _Refused(f"{target!r}: give NAMESPACE/NAME (or NAME with -n NAMESPACE; namespace default without)")
    if slash and namespace is not None and namespace != ns:
        raise _Refused(f"{target!r} is in namespace {ns!r} but -n/--namespace says {namespace!r}")
    return ns, name


def _chosen(collector: core.StoryCollector, state: ClusterState, named: str) -> str | None:
    """The workload to explain: of those found, the last one still in the fold, else the last found."""
    if not collector.keys:
        return named if named in state.workloads else None
    live = [k for k in collector.keys if k in state.workloads and not state.workloads[k].deleted_seq]
    return live[-1] if live else collector.keys[-1]


def rejection_report(collector: core.StoryCollector, state: ClusterState) -> dict[str, Any]:
    """The JSON form of the story of objects of the name asked for that the log refused and that have no
    Workload (a Job whose Workload could not be made: an unknown WorkloadPriorityClass, a bad label): per
    object, ``kind``, ``namespace``, ``name``, its latest rejection's ``field`` and ``problem``, whether
    that rejection ``stillStands`` in the fold (not replaced, the object not deleted nor observed valid
    since), ``deleted``, and its ``story`` (each rejection and the deletion: ``seq``, ``time`` RFC 3339,
    ``approximateTime``, ``what``, ``text``, ``detail``). ``status``: ``rejected`` when a rejection
    still stands, else ``deleted`` when the objects are gone, else ``no longer rejected``."""

    objects = []
    for identity, lines in collector.rejections.items():
        kind, namespace, name = identity
        last = collector.last_rejections[identity]
        kept = state.rejections.get(identity)
        stands = kept is not None and (kept.field, kept.problem) == (last.field, last.problem)
        objects.append(
            {
                "kind": kind,
                "namespace": namespace,
                "name": name,
                "field": last.field,
                "problem": last.problem,
                "stillStands": stands,
                "deleted": not stands and lines[-1].what == "deleted",
                "story": [_line_json(line, detail=True) for line in lines],
            }
        )
    if any(o["stillStands"] for o in objects):
        status = "rejected"
    elif all(o["deleted"] for o in objects):
        status = "deleted"
    else:
        status = "no longer rejected"
    return {
        "workload": None,
        "object": f"{collector.namespace}/{collector.name}",
        "status": status,
        "rejections": objects,
    }


def _render_rejections(report: dict[str, Any], *, as_of: str) -> None:
    from rich.table import Table
    from rich.text import Text

    console = _console()
    kinds = ", ".join(dict.fromkeys(o["kind"] for o in report["rejections"]))
    console.print(Text(f"{kinds} {report['object']}: {report['status']}, no Workload", style="bold"))
    console.print(Text(as_of, style="dim"))
    table = Table(title="story", title_justify="left", show_lines=False, expand=False)
    table.add_column("SEQ", justify="right", no_wrap=True)
    table.add_column("TIME", no_wrap=True)
    table.add_column("WHAT", no_wrap=True, style="cyan")
    table.add_column("DETAIL", overflow="fold")
    lines = sorted((line for o in report["rejections"] for line in o["story"]), key=lambda line: line["seq"])
    for line in lines:
        when = ("~" if line["approximateTime"] else "") + line["time"]
        table.add_row(f"#{line['seq']}", when, line["what"], Text(line["text"]))  # no markup: fields have [..]
    console.print(table)
    for obj in report["rejections"]:
        what = f"{obj['kind']} {obj['namespace']}/{obj['name']}"
        where = f"field {obj['field']}: " if obj["field"] else ""
        if obj["stillStands"]:
            fix = f"fix {obj['field']} and apply it again" if obj["field"] else "fix it and apply it again"
            console.print(
                Text(
                    f"the rejection still stands: {what} was refused ({where}{obj['problem']}), so kueue-es made no"
                    f" Workload for it; {fix}",
                    style="bold yellow",
                )
            )
        elif obj["deleted"]:
            console.print(Text(f"the rejection no longer stands: {what} was deleted"))
        else:
            console.print(Text(f"the rejection no longer stands: {what} was replaced or seen valid since"))


def explanation(collector: core.StoryCollector, state: ClusterState, key: str, *, now_ms: int) -> dict[str, Any]:
    """The JSON form of an explanation: the workload, its owner, story, position and needs."""
    from kueue_es.scheduling import explain as core
    from kueue_es.scheduling import visibility

    wl = state.workloads.get(key)
    position = None
    if wl is not None:
        namespace, name = key.split("/", 1)
        entry = visibility.position_of(state, namespace, name, now_ms=now_ms)
        if entry is not None:
            position = {
                "localQueue": f"{entry.namespace}/{entry.local_queue}",
                "clusterQueue": entry.cluster_queue,
                "positionInLocalQueue": entry.position_in_local_queue,
                "positionInClusterQueue": entry.position_in_cluster_queue,
                "pendingInClusterQueue": len(visibility.pending_in_cluster_queue(state, entry.cluster_queue)),
                "parked": entry.parked,
            }
    needed = core.needs(
        state,
        key,
        now_ms=now_ms,
        deleted=collector.ended_in_deletion(key),
        deactivation=collector.deactivations.get(key),
    )
    return {
        "partition": workload_partition(state, key, pending=needed.status == "pending"),
        "workload": key,
        "owner": collector.owners.get(key, ""),
        "otherWorkloads": [k for k in collector.keys if k != key],
        "status": needed.status,
        # the base priority (Kueue's spec.priority, the visibility API's) and the one the deciders used
        "priority": needed.priority if wl is not None else None,
        "effectivePriority": needed.effective_priority if wl is not None else None,
        "story": [_line_json(line, detail=bool(line.detail)) for line in collector.lines.get(key, [])],
        "repeatedPendingOutcomes": collector.repeats(key),
        "sliceChain": _slice_chain(state, key),
        "position": position,
        "needs": _needs_json(needed),
        "multikueue": _multikueue_json(state, key, now_ms=now_ms),
    }


def _line_json(line: Any, *, detail: bool) -> dict[str, Any]:
    """One story line (``core.StoryLine``) as ``-o json`` writes it: its sequence, RFC 3339 time (``approximateTime``
    when the event had none of its own), what happened and the text; ``detail`` too when asked."""
    from kueue_es import logsource

    out = {
        "seq": line.seq,
        "time": logsource.rfc3339(line.time_ms),
        "approximateTime": line.approximate,
        "what": line.what,
        "text": line.text,
    }
    return {**out, "detail": line.detail} if detail else out


def _multikueue_json(state: ClusterState, key: str, *, now_ms: int) -> dict[str, Any] | None:
    """MultiKueue (SEMANTICS-ADVANCED E): the workload's check, the workers nominated, each copy's state,
    the winner and, while nothing is decided, why (None for a workload without a MultiKueue check now)."""
    from kueue_es.scheduling import multikueue

    wl = state.workloads.get(key)
    why = multikueue.explain(state, wl, now_ms=now_ms) if wl is not None else None
    if why is None:
        return None
    return {
        "check": why.check,
        "state": why.state,
        "nominated": list(why.nominated),
        "copies": dict(why.copies),
        "clusterName": why.cluster_name,
        "waiting": why.waiting,
    }


def _slice_chain(state: ClusterState, key: str) -> list[dict[str, Any]]:
    """An elastic workload's slices, oldest first (SEMANTICS-ADVANCED D.1): each slice's name, pod
    counts, the slice it replaces and where it stands; [] for a workload that is not elastic."""
    from kueue_es.events import slices as slice_names
    from kueue_es.scheduling import slices

    out = []
    for member in slices.chain_of(state, key):
        if member.finished is not None:
            stands = f"finished ({member.finished.reason})"
        elif member.deleted_seq:
            stands = "deleted"
        elif member.admitted:
            stands = "admitted"
        elif member.reservation is not None:
            stands = "quota reserved"
        else:
            stands = "pending"
        out.append(
            {
                "workload": member.key,
                "podSets": {ps.name: ps.count for ps in member.workload.spec.pod_sets},
                "replacementFor": slice_names.replacement_for(member.workload) or "",
                "status": stands,
            }
        )
    return out


def _transit_json(transit: tuple[str, int, str]) -> dict[str, Any]:
    source, moved_at, target = transit
    return {
        "from": source,
        "into": target,
        "movedAt": moved_at,
        "waitsFor": f"a DecisionRecord of {source} with a basis at or after #{moved_at} (its fence)",
    }


def _transits_into(state: ClusterState, partition: str) -> list[dict[str, Any]]:
    """The hand-overs into ``partition`` under way: what moved (``cq:NAME``, ``cohort:NAME``, ``wl:NS/NAME``),
    from where, at which sequence, and the fence it waits for."""
    return [
        {"object": name, **_transit_json(transit)}
        for name, transit in sorted(state.transits.items())
        if transit[2] == partition
    ]


def _legacy(state: ClusterState) -> bool:
    """A log of the single legacy partition (``p0``): its records decide over everything."""
    from kueue_es.projections.partitions import LEGACY

    return LEGACY in state.heads and len(state.heads) == 1


def workload_partition(state: ClusterState, key: str, *, pending: bool) -> dict[str, Any] | None:
    """The partition of workload ``key`` (docs/design.md Partitions) as the log shows it: its id, the last
    DecisionRecord of it (``lastRecordSeq``, None when no decider has committed in it), the workload's own
    hand-over under way (``transit``) and those into its partition (``blockedBy``: it decides nothing until
    each source's fence), and, when the workload waits because of them, ``why`` in words. None for a
    workload the fold does not hold."""
    parts = state.partitions
    partition = parts.of_workload(key)
    if partition is None:
        return None
    transit = state.transits.get("wl:" + key)
    blocked_by = _transits_into(state, partition)
    last = state.heads.get(partition)
    why = ""
    if pending and blocked_by:
        first = blocked_by[0]
        why = (
            f"partition {partition} decides nothing until the hand-over into it is over: {first['object']} moved"
            f" from {first['from']} at #{first['movedAt']} and waits for {first['waitsFor']}; if {first['from']}"
            f" has no decider (a static --partitions list without it) that record never comes"
        )
        if len(blocked_by) > 1:
            more = len(blocked_by) - 1
            why += f" ({more} more hand-over{'' if more == 1 else 's'} into {partition} under way)"
    elif pending and last is None and not _legacy(state):
        why = (
            f"partition {partition} has no decider at work: no DecisionRecord of {partition} is in the log. A"
            f" decider decides it only with --partitions all or a static --partitions list naming {partition}"
            " (the deciders log partition_unowned and /readyz lists unowned_partitions)"
        )
    return {
        "partition": partition,
        "lastRecordSeq": last,
        "transit": _transit_json(transit) if transit is not None else None,
        "blockedBy": blocked_by,
        "why": why,
    }


def _needs_json(needed: core.Needs) -> dict[str, Any]:
    return {
        "clusterQueue": needed.cluster_queue,
        "cohort": needed.cohort,
        "queueingStrategy": needed.strategy,
        "reason": needed.reason,
        "message": needed.message,
        "blocked": list(needed.blocked),
        "nominatedVictims": list(needed.nominated),
        "flavors": [
            {
                "flavor": flavor.flavor,
                "exists": flavor.exists,
                "fits": flavor.fits,
                "resources": [
                    {
                        "resource": r.resource,
                        "asks": r.asks,
                        "nominal": r.nominal,
                        "used": r.used,
                        "available": r.available,
                        "short": r.short,
                        "lendable": r.lendable,
                        "potential": r.potential,
                        "borrowingLimit": r.borrowing_limit,
                        "preemptible": [
                            {
                                "workload": h.key,
                                "priority": h.priority,
                                "effectivePriority": h.effective_priority,
                                "amount": h.amount,
                            }
                            for h in r.preemptible
                        ],
                        "reclaimable": [
                            {
                                "workload": h.key,
                                "clusterQueue": h.cluster_queue,
                                "priority": h.priority,
                                "effectivePriority": h.effective_priority,
                                "amount": h.amount,
                                "reason": h.reason,
                            }
                            for h in r.reclaimable
                        ],
                        "reclaimAmount": r.reclaim_amount,
                    }
                    for r in flavor.resources
                ],
            }
            for group in needed.groups
            for flavor in group
        ],
        "summary": needed.summary(),
        "devices": list(needed.devices),
    }


def _render_explanation(report: dict[str, Any], *, as_of: str) -> None:
    from rich.table import Table
    from rich.text import Text

    console = _console()
    owner = f" (for {report['owner']})" if report["owner"] else ""
    from kueue_es.scheduling.explain import DEACTIVATED, ON_HOLD, priority_text

    status = report["status"]
    if status == DEACTIVATED:  # Kueue's Evicted condition on it, not "pending"
        status = f"{status} (Evicted {report['needs']['reason']}: {report['needs']['message']})"
    elif status == ON_HOLD:  # Kueue's QuotaReserved condition on it
        status = f"{status} (QuotaReserved {report['needs']['reason']}: {report['needs']['message']})"
    console.print(Text(f"Workload {report['workload']}{owner}: {status}", style="bold"))
    console.print(Text(as_of, style="dim"))
    base, effective = report["priority"], report["effectivePriority"]
    if base is not None and effective is not None and base != effective:
        # only then: the deciders order and preempt by the boosted priority, not spec.priority
        console.print(
            Text(f"{priority_text(base, effective)}: the effective priority the admitter and the preemptor use")
        )
    if report["otherWorkloads"]:
        console.print(Text(f"earlier workloads of the same name: {', '.join(report['otherWorkloads'])}", style="dim"))
    table = Table(title="story", title_justify="left", show_lines=False, expand=False)
    table.add_column("SEQ", justify="right", no_wrap=True)
    table.add_column("TIME", no_wrap=True)
    table.add_column("WHAT", no_wrap=True, style="cyan")
    table.add_column("DETAIL", overflow="fold")
    for line in report["story"]:
        when = ("~" if line["approximateTime"] else "") + line["time"]
        table.add_row(f"#{line['seq']}", when, line["what"], Text(line["text"]))  # no markup: fields have [..]
    console.print(table)
    repeats = report["repeatedPendingOutcomes"]
    if repeats:
        console.print(
            Text(
                f"({repeats} more pending {'outcome' if repeats == 1 else 'outcomes'} repeated the reason above)",
                style="dim",
            )
        )
    chain = report.get("sliceChain") or []
    if chain:
        links = " -> ".join(
            f"{c['workload']} ({', '.join(f'{n}: {k}' for n, k in c['podSets'].items())} pods, {c['status']})"
            for c in chain
        )
        console.print(Text(f"elastic slice chain: {links}"))
    position = report["position"]
    if position is not None:
        parked = ", inadmissible (parked)" if position["parked"] else ""
        console.print(
            f"position: {position['positionInLocalQueue']} in LocalQueue {position['localQueue']},"
            f" {position['positionInClusterQueue']} of {position['pendingInClusterQueue']} pending in ClusterQueue"
            f" {position['clusterQueue']} (0 is next){parked}"
        )
    part = report["partition"]
    if part is not None:
        last = f"last record #{part['lastRecordSeq']}" if part["lastRecordSeq"] is not None else "no record yet"
        line = f"partition: {part['partition']} ({last})"
        if part["transit"] is not None:
            t = part["transit"]
            line += f"; in transit from {t['from']} since #{t['movedAt']}, waiting for {t['waitsFor']}"
        console.print(Text(line))
        if part["why"]:
            console.print(Text(f"  why it waits: {part['why']}", style="bold yellow"))
    mk = report.get("multikueue")
    if mk is not None:
        copies = ", ".join(f"{c}: {st}" for c, st in mk["copies"].items()) or "none"
        console.print(
            Text(
                f"MultiKueue: check {mk['check']} is {mk['state']}; nominated: {', '.join(mk['nominated']) or 'none'};"
                f" copies: {copies}; clusterName: {mk['clusterName'] or 'none'}"
            )
        )
        if mk["waiting"]:
            console.print(Text(f"  MultiKueue waits: {mk['waiting']}", style="bold yellow"))
    needs = report["needs"]
    if needs["devices"]:
        console.print(Text("devices (DRA):", style="bold"))
        for line in needs["devices"]:
            console.print(Text(f"  {line}"))
    if report["status"] == "pending":
        if needs["message"]:
            console.print(Text(f"Kueue's message: {needs['message']}"))
        held_up = part is not None and part["why"]
        console.print(
            Text(f"what it would take{' (once its partition decides again)' if held_up else ''}:", style="bold")
        )
        for line in needs["summary"] or ["nothing found that blocks it: it should be tried in the next cycle"]:
            console.print(Text(("  " if not line.startswith("  ") else "  ") + line))
    elif needs["blocked"]:
        for line in needs["blocked"]:
            console.print(Text(line))


# --- list -------------------------------------------------------------------------------------------------


WORKLOAD_STATUSES = ("all", "pending", "quotareserved", "admitted", "finished")


@dataclass(frozen=True)
class ListFilters:
    """kueuectl's list filters (cmd/kueuectl/app/list): ``cluster_queue`` keeps the LocalQueues of it and
    the Workloads admitted to it (a pending one has no admission, so none); ``local_queue`` the
    Workloads of it; ``statuses`` (lower case, ``all`` for every one) the Workloads in one of them;
    ``active`` the ClusterQueues whose Active condition is it. Empty: no filter."""

    cluster_queue: str = ""
    local_queue: str = ""
    statuses: frozenset[str] = frozenset()
    active: bool | None = None


def list_filters(args: argparse.Namespace) -> ListFilters:
    """The filters of ``list``'s flags. Raises _Refused, with kueuectl's message, for a status or an
    ``--active`` value kueuectl refuses, or more than one ``--active``."""
    statuses = set()
    for status in args.status:
        if status.lower() not in WORKLOAD_STATUSES:
            raise _Refused(f'invalid status value ({status}). Must be "all", "pending", "admitted" or "finished"')
        statuses.add(status.lower())
    active = []
    for raw in args.active:
        for text in raw.split(","):
            if text.strip() not in _BOOLS:
                raise _Refused(
                    f'invalid argument "{text}" for "--active" flag: strconv.ParseBool: parsing "{text}": invalid syntax'
                )
            active.append(_BOOLS[text.strip()])
    if len(active) > 1:
        raise _Refused("only one active flag can be provided")
    return ListFilters(
        cluster_queue=args.clusterqueue,
        local_queue=args.localqueue,
        statuses=frozenset(statuses),
        active=active[0] if active else None,
    )


_BOOLS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True)}
_BOOLS.update(dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False))  # Go's strconv.ParseBool


@_guarded
def run_list(args: argparse.Namespace) -> int:
    """``kueue-es list KIND``."""
    filters = list_filters(args)
    admissions = FinishedAdmissions()
    folded = _fold(args, observer=admissions)
    _print_notes(folded)
    kind = KINDS[args.kind]
    namespace = None if args.all_namespaces else args.namespace
    admissions.start_seq = folded.start_seq
    rows = list_rows(
        folded.state, kind, namespace=namespace, now_ms=folded.now_ms, only=filters, finished_admissions=admissions
    )
    if args.output != "text":
        _dump(rows, args.output)
        return 0
    _print_table(
        rows,
        empty=f"No {kind} found"
        + (f" in namespace {namespace}" if namespace and kind in ("localqueue", "workload") else ""),
        all_namespaces=namespace is None,
    )
    return 0


def _age(created_ms: int, now_ms: int) -> str:
    """kueuectl's AGE: apimachinery's ``duration.HumanDuration`` from ``created_ms`` to ``now_ms`` (ms
    since the epoch; ``119s``, ``2m31s``, ``42m``, ``3h1m``...); ``<unknown>`` without a creation time,
    as kubectl prints a zero creationTimestamp."""
    from kueue_es.sim.tables import human_duration

    if not created_ms:
        return "<unknown>"
    return human_duration((now_ms - created_ms) / 1000)


@dataclass
class FinishedAdmissions:
    """A fold observer (:data:`kueue_es.logsource.Observer`) that keeps, per finished Workload, when the
    admission it finished in began (ms since the epoch): kueuectl's EXEC TIME of a finished workload runs
    from its Admitted condition's lastTransitionTime to its Finished one's, and a finished Workload keeps
    its Admitted condition (the dispatcher writes no change for a release by finish, as Kueue's cache drops
    the usage without a write), while the fold's state forgets the admission once the quota is released.

    ``start_seq``: where the fold started (a snapshot's position, 0: #1); a release before it was not seen,
    so :meth:`since` answers None (not known) for a workload that finished there."""

    admitted_since: dict[tuple[str, str], int] = field(default_factory=dict)
    start_seq: int = 0

    def __call__(self, seq: int, event: Any, state: ClusterState) -> None:
        """See each accepted event with the state just before it: note the admission a finished workload
        releases its quota in, forget the one of any other release (its Admitted condition turns False)."""
        from kueue_es.events import types

        if isinstance(event, types.FinishedRelease):
            event = event.quota_released()
        if not isinstance(event, types.QuotaReleased):
            return
        wl = state.workloads.get(event.workload.key)
        if wl is None:
            return
        key = (wl.key, wl.workload.metadata.uid)
        if wl.admitted and wl.admitted_at_ms and wl.finished is not None:
            self.admitted_since[key] = wl.admitted_at_ms
        else:
            self.admitted_since.pop(key, None)

    def since(self, wl: WorkloadState) -> int | None:
        """When the admission ``wl`` finished in began (ms); 0 when it finished not admitted; None when the
        fold did not see its release (before ``start_seq``)."""
        if wl.finished_seq and wl.finished_seq <= self.start_seq:
            return None
        return self.admitted_since.get((wl.key, wl.workload.metadata.uid), 0)


def _exec_time(wl: WorkloadState, now_ms: int, finished_admissions: FinishedAdmissions | None) -> str:
    """kueuectl's EXEC TIME (list_workload_printer.go): only while the Admitted condition is True, from its
    lastTransitionTime to the Finished condition's (a finished workload) or to now; "" otherwise (a
    pending workload, a preempted one too, shows none). Without ``finished_admissions`` (or for a
    workload that finished before the fold's start) a finished workload's time is its admitted time
    over all its admissions, the state's accumulatedPastExecutionTime: its one admission's, unless it
    was evicted before."""
    from kueue_es.sim.tables import human_duration

    finished = wl.finished
    if wl.admitted and wl.admitted_at_ms:
        since = wl.admitted_at_ms
    elif finished is not None:
        known = finished_admissions.since(wl) if finished_admissions is not None else None
        if known is None:
            return human_duration(wl.accumulated_ms / 1000) if wl.accumulated_ms else ""
        since = known
    else:
        return ""
    if not since:
        return ""
    end = finished.at_ms if finished is not None and finished.at_ms else now_ms
    return human_duration((end - since) / 1000)


def _status_of(wl: WorkloadState) -> str:
    """kueuectl's STATUS: Kueue's workload.Status (pkg/workload) upper-cased."""
    if wl.finished is not None:
        return "FINISHED"
    if wl.admitted and wl.reservation is not None:
        return "ADMITTED"
    if wl.reservation is not None:
        return "QUOTARESERVED"
    return "PENDING"


#: kueuectl cuts a JOB TYPE longer than this and ends it in "..." (list_workload_printer.go crdTypeMaxLength).
JOB_TYPE_MAX_LENGTH = 20


def _job_type(api_version: str, kind: str) -> str:
    """kueuectl's JOB TYPE of one owner (``api_version`` unused: kept for the call sites' shape): its singular
    resource name (``job``, ``pod``, ``pytorchjob``; the singular name of every kind Kueue integrates is its kind
    in lower case), cut to 20 characters and ``...`` as kueuectl cuts it. kueuectl adds ``.GROUP`` only when
    the discovery entry names a group, which an API server leaves empty for a resource of its own group
    (list_workload_printer.go apiResourceType), so a Job is ``job``, as ``kubectl kueue list workload`` prints
    it."""
    del api_version
    text = kind.lower()
    return f"{text[:JOB_TYPE_MAX_LENGTH]}..." if len(text) > JOB_TYPE_MAX_LENGTH else text


def workload_owners(workload: Any) -> list[tuple[str, str, str]]:
    """The owner references of a Workload (a :class:`kueue_es.events.models.Workload`) that the log knows, as
    ``(apiVersion, kind, name)``, in the order the dispatcher writes them on the Workload object: for a
    StatefulSet's or LeaderWorkerSet's serving group that parent first (read from the Workload's
    ``kueue.x-k8s.io/job-owner-gvk`` and ``-name`` annotations, Kueue statefulset_reconciler.go and
    leaderworkerset_reconciler.go constructWorkload), then the job it was made for (``owner``); for a pod group
    every pod it was made from, by name, as Kueue's Workload is owned by each (EnsureWorkloadOwnedByAllMembers;
    the watcher's :data:`~kueue_es.events.models.POD_GROUP_MEMBERS_ANNOTATION`; the first pod alone in a log
    written before it). ``[]`` when it has none."""
    from kueue_es.events import job_owners, models

    owners = []
    parent = job_owners.serving_parent(workload)
    if parent is not None:
        owners.append((parent.api_version, parent.kind, parent.name))
    owner = workload.owner
    if owner is None:
        return owners
    members = models.pod_group_members(workload.metadata) if owner.kind == "Pod" else []
    if not members:
        members = [owner.name]
    owners.extend((owner.api_version, owner.kind, name) for name in members)
    return owners


def list_rows(
    state: ClusterState,
    kind: str,
    *,
    namespace: str | None,
    now_ms: int,
    only: ListFilters | None = None,
    finished_admissions: FinishedAdmissions | None = None,
) -> list[dict[str, Any]]:
    """kueuectl's list columns for ``kind`` (clusterqueue, localqueue, workload, resourceflavor) as rows of
    column name -> value, from ``state`` (cmd/kueuectl/app/list/list_*_printer.go); ``namespace`` None:
    every namespace (LocalQueues, Workloads); ``only``: kueuectl's filters (:class:`ListFilters`);
    ``now_ms``: the time AGE and a running workload's EXEC TIME are measured to (ms since the epoch);
    ``finished_admissions``: the fold's observer that knows when finished workloads were admitted
    (:func:`_exec_time`)."""
    only = only if only is not None else ListFilters()
    from kueue_es.scheduling import readiness, visibility

    if kind == "resourceflavor":
        return [
            {
                "NAME": name,
                "NODE LABELS": ",".join(f"{k}={v}" for k, v in sorted(rf.spec.node_labels.items())),
                "AGE": _age(rf.metadata.creation_timestamp_ms, now_ms),
            }
            for name, rf in sorted(state.flavors.items())
        ]
    pending = {name: visibility.pending_in_cluster_queue(state, name, now_ms=now_ms) for name in state.cluster_queues}
    if kind == "clusterqueue":
        return [
            {
                "NAME": name,
                "COHORT": cq.spec.cohort_name or "",
                "PENDING WORKLOADS": len(pending[name]),
                "ADMITTED WORKLOADS": _admitted(state, cluster_queue=name),
                "ACTIVE": readiness.cluster_queue_active(cq, state=state).status,
                "AGE": _age(cq.metadata.creation_timestamp_ms, now_ms),
            }
            for name, cq in sorted(state.cluster_queues.items())
            if only.active is None or readiness.cluster_queue_active(cq, state=state).status == only.active
        ]
    if kind == "localqueue":
        rows = []
        for (ns, name), lq in sorted(state.local_queues.items()):
            if (namespace is not None and ns != namespace) or only.cluster_queue not in ("", lq.spec.cluster_queue):
                continue
            rows.append(
                {
                    "NAMESPACE": ns,
                    "NAME": name,
                    "CLUSTERQUEUE": lq.spec.cluster_queue,
                    # as its status' pendingWorkloads: also while its ClusterQueue does not exist
                    "PENDING WORKLOADS": visibility.pending_count_in_local_queue(state, ns, name),
                    "ADMITTED WORKLOADS": _admitted(state, local_queue=(ns, name)),
                    "AGE": _age(lq.metadata.creation_timestamp_ms, now_ms),
                }
            )
        return rows
    if kind != "workload":
        raise ValueError(f"unknown kind {kind!r}")
    positions = {f"{p.namespace}/{p.name}": p for entries in pending.values() for p in entries}
    rows = []
    for key, wl in sorted(state.workloads.items()):
        meta = wl.workload.metadata
        if wl.deleted_seq or (namespace is not None and meta.namespace != namespace):
            continue
        admitted_to = wl.reservation.cluster_queue if wl.reservation is not None else ""
        if only.local_queue not in ("", wl.workload.spec.queue_name) or only.cluster_queue not in ("", admitted_to):
            continue
        if only.statuses and "all" not in only.statuses and _status_of(wl).lower() not in only.statuses:
            continue
        queue = state.local_queues.get((meta.namespace, wl.workload.spec.queue_name))
        cq = wl.reservation.cluster_queue if wl.reservation is not None else (queue.spec.cluster_queue if queue else "")
        entry = positions.get(key)
        owners = workload_owners(wl.workload)
        rows.append(
            {
                "NAMESPACE": meta.namespace,
                "NAME": meta.name,
                # every owner joined, as kueuectl joins the Workload's ownerReferences (each column a set: sorted)
                "JOB TYPE": ", ".join(sorted({_job_type(api_version, kind) for api_version, kind, _ in owners})),
                "JOB NAME": ", ".join(sorted({name for _, _, name in owners})),
                "LOCALQUEUE": wl.workload.spec.queue_name,
                "CLUSTERQUEUE": cq,
                "STATUS": _status_of(wl),
                "POSITION IN QUEUE": entry.position_in_local_queue if entry is not None else "",
                "EXEC TIME": _exec_time(wl, now_ms, finished_admissions),
                "AGE": _age(meta.creation_timestamp_ms, now_ms),
            }
        )
    return rows


def _admitted(state: ClusterState, *, cluster_queue: str = "", local_queue: tuple[str, str] | None = None) -> int:
    count = 0
    for wl in state.workloads.values():
        if not wl.admitted or wl.reservation is None:
            continue
        if cluster_queue and wl.reservation.cluster_queue != cluster_queue:
            continue
        if local_queue is not None and (wl.workload.metadata.namespace, wl.workload.spec.queue_name) != local_queue:
            continue
        count += 1
    return count


def _print_table(rows: list[dict[str, Any]], *, empty: str, all_namespaces: bool) -> None:
    """``rows`` as kubectl (and ``kubectl kueue list``) prints a table: tab-aligned columns never cut
    to the terminal's width, NAMESPACE first only with ``-A``."""
    from kueue_es.kueuectl import printing

    if not rows:
        print(empty)
        return
    headers = [column for column in rows[0] if column != "NAMESPACE"]
    namespaces = [str(row["NAMESPACE"]) for row in rows] if all_namespaces and "NAMESPACE" in rows[0] else None
    sys.stdout.write(printing.table(headers, [[row[h] for h in headers] for row in rows], namespaces=namespaces))


def _print_wide(console: Any, table: Any) -> None:
    """Print a rich ``table`` whose cells do not wrap at its natural width, wider than the terminal if
    it must (as kubectl prints), never with its columns cut to ``…``."""
    from rich.measure import Measurement

    needed = Measurement.get(console, console.options.update_width(100_000), table).maximum
    width = console.width
    console.width = max(width, needed)  # rich caps print(width=) at the console's width
    try:
        console.print(table)
    finally:
        console.width = width


# --- status -----------------------------------------------------------------------------------------------


@_guarded
def run_status(args: argparse.Namespace) -> int:
    """``kueue-es status``."""
    from kueue_es import logsource

    folded = _fold(args)
    _print_notes(folded)
    report = status_report(folded.state, now_ms=folded.now_ms)
    report["asOf"] = {"seq": folded.state.last_seq, "time": logsource.rfc3339(folded.now_ms), "at": args.at}
    if args.output != "text":
        _dump(report, args.output)
        return 0
    _render_status(report, as_of=_as_of(folded, args))
    return 0


def status_report(state: ClusterState, *, now_ms: int) -> dict[str, Any]:
    """Per ClusterQueue: cohort, strategy, stop policy, workload counts (pending active / inadmissible as
    ``kueue_pending_workloads`` counts them, :func:`kueue_es.scheduling.readiness.counts_inadmissible`: all of an
    inactive ClusterQueue's inadmissible, as Kueue's metrics.go reportCQPendingWorkloads; quota reserved, admitted) and per flavor and resource the usage, nominal quota and limits (amounts
    as Kubernetes quantities); the cohorts with parent and member ClusterQueues and cohorts."""
    from kueue_es.events.quantities import format_amount
    from kueue_es.projections import quota
    from kueue_es.scheduling import queues as queueing
    from kueue_es.scheduling import readiness, visibility

    tree = quota.build(state)
    triggers = queueing.requeue_triggers(state, tree)
    queues = []
    for name, cq in sorted(state.cluster_queues.items()):
        waiting = visibility.pending_in_cluster_queue(state, name, now_ms=now_ms)
        admitting = readiness.admits(state, tree, name)
        inadmissible = sum(
            1
            for p in waiting
            if readiness.counts_inadmissible(
                state.queued[(p.namespace, p.local_queue)],
                f"{p.namespace}/{p.name}",
                admitting=admitting,
                trigger=triggers.get(name, 0),
            )
        )
        reserved = [
            wl for wl in state.workloads.values() if wl.reservation is not None and wl.reservation.cluster_queue == name
        ]
        resources = []
        for group in cq.spec.resource_groups:
            for fq in group.flavors:
                for rq in fq.resources:
                    fr = tree.fr(fq.name, rq.name)
                    used = state.usage_of(name, fq.name, rq.name)
                    resources.append(
                        {
                            "flavor": fq.name,
                            "resource": rq.name,
                            "usage": format_amount(rq.name, used),
                            "nominalQuota": format_amount(rq.name, rq.nominal_quota),
                            "borrowed": format_amount(rq.name, max(0, used - rq.nominal_quota)),
                            "borrowingLimit": None
                            if rq.borrowing_limit is None
                            else format_amount(rq.name, rq.borrowing_limit),
                            "lendingLimit": None
                            if rq.lending_limit is None
                            else format_amount(rq.name, rq.lending_limit),
                            "available": format_amount(rq.name, tree.available(name, fr))
                            if name in tree.cluster_queues
                            else "0",
                            "usagePercent": round(100 * used / rq.nominal_quota) if rq.nominal_quota else None,
                        }
                    )
        transit = state.transits.get("cq:" + name)
        queues.append(
            {
                "name": name,
                "partition": state.partitions.of_cluster_queue(name) or "",
                "transit": _transit_json(transit) if transit is not None else None,
                "cohort": cq.spec.cohort_name or "",
                "queueingStrategy": cq.spec.queueing_strategy,
                "stopPolicy": cq.spec.stop_policy,
                "pendingActive": len(waiting) - inadmissible,
                "pendingInadmissible": inadmissible,
                "quotaReserved": len(reserved),
                "admitted": sum(1 for wl in reserved if wl.admitted),
                "resources": resources,
            }
        )
    names = set(state.cohorts) | {cq.spec.cohort_name for cq in state.cluster_queues.values() if cq.spec.cohort_name}
    names |= {c.spec.parent_name for c in state.cohorts.values() if c.spec.parent_name}
    cohorts = []
    for name in sorted(n for n in names if n):
        obj = state.cohorts.get(name)
        cohorts.append(
            {
                "name": name,
                "parent": (obj.spec.parent_name or "") if obj is not None else "",
                "implicit": obj is None,
                "clusterQueues": sorted(n for n, cq in state.cluster_queues.items() if cq.spec.cohort_name == name),
                "cohorts": sorted(n for n, c in state.cohorts.items() if c.spec.parent_name == name),
            }
        )
    partitions = [
        {
            "partition": p,
            "clusterQueues": sorted(state.partitions.members(p)),
            "lastRecordSeq": state.heads.get(p),
            "fenceOwedFrom": state.partitions.fence_needed(p),
            "blockedBy": _transits_into(state, p),
        }
        for p in state.partitions.all()
    ]
    return {"clusterQueues": queues, "cohorts": cohorts, "partitions": partitions}


def _render_status(report: dict[str, Any], *, as_of: str) -> None:
    from rich.table import Table, box

    console = _console()
    console.print(f"[dim]{as_of}[/dim]")
    if not report["clusterQueues"]:
        console.print("No ClusterQueue in the log")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="ClusterQueues", title_justify="left")
    for column in (
        "CLUSTERQUEUE",
        "PARTITION",
        "COHORT",
        "PENDING",
        "INADMISSIBLE",
        "RESERVED",
        "ADMITTED",
        "FLAVOR",
        "RESOURCE",
        "USAGE/QUOTA",
        "BORROWED",
        "BORROWING LIMIT",
    ):
        table.add_column(column, no_wrap=True)
    for cq in report["clusterQueues"]:
        first = True
        for r in cq["resources"] or [{}]:
            head = (
                [
                    cq["name"] + ("" if cq["stopPolicy"] == "None" else f" (stopped: {cq['stopPolicy']})"),
                    cq["partition"]
                    + (
                        f" (from {cq['transit']['from']} since #{cq['transit']['movedAt']}, waits for its fence)"
                        if cq["transit"]
                        else ""
                    ),
                    cq["cohort"],
                    str(cq["pendingActive"]),
                    str(cq["pendingInadmissible"]),
                    str(cq["quotaReserved"]),
                    str(cq["admitted"]),
                ]
                if first
                else [""] * 7
            )
            first = False
            if r:
                percent = f" ({r['usagePercent']}%)" if r["usagePercent"] is not None else ""
                rest = [
                    r["flavor"],
                    r["resource"],
                    f"{r['usage']}/{r['nominalQuota']}{percent}",
                    r["borrowed"],
                    r["borrowingLimit"] or "-",
                ]
            else:
                rest = ["", "", "", "", ""]
            table.add_row(*head, *rest)
    _print_wide(console, table)
    if report["cohorts"]:
        cohorts = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Cohorts", title_justify="left")
        for column in ("COHORT", "PARENT", "CLUSTERQUEUES", "COHORTS"):
            cohorts.add_column(column, no_wrap=True)
        for c in report["cohorts"]:
            name = c["name"] + (" (implicit)" if c["implicit"] else "")
            cohorts.add_row(name, c["parent"], ", ".join(c["clusterQueues"]), ", ".join(c["cohorts"]))
        _print_wide(console, cohorts)
    if report["partitions"]:
        parts = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title="Partitions", title_justify="left")
        for column in ("PARTITION", "CLUSTERQUEUES", "LAST RECORD", "HAND-OVERS"):
            parts.add_column(column, no_wrap=True)
        for p in report["partitions"]:
            hand_overs = [
                f"{t['object']} from {t['from']} since #{t['movedAt']}: waits for {t['from']}'s fence"
                for t in p["blockedBy"]
            ]
            if p["fenceOwedFrom"] is not None:
                hand_overs.append(f"owes a fence: a record with a basis at or after #{p['fenceOwedFrom']}")
            last = f"#{p['lastRecordSeq']}" if p["lastRecordSeq"] is not None else "none"
            parts.add_row(p["partition"], ", ".join(p["clusterQueues"]), last, "; ".join(hand_overs))
        _print_wide(console, parts)
