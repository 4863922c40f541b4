"""Checkpoints of the folded state: a cache beside the log, never a source of truth.

A checkpoint is the :class:`ClusterState` after folding the log up to a sequence (the
*position*: the last message fed, whatever its batch verifier holds), stored as data only
(issue 13, point 3): one line of JSON, the :class:`Header`, then the body, the state as a
msgpack :class:`Snapshot`. Loading decodes both with msgspec into fixed types and never runs
code from the file (no pickle: a checkpoint directory someone else can write is a cache to
distrust, not a way in). The header names the format and its version, the kueue-es version
and :func:`code_tag`, a digest of the body's schema, the position, the log it was folded from
(:class:`LogIdentity`), the last sequence on each partition's head subject up to the position,
and the body's length and SHA-256. A file that does not decode, names another format, version,
code or schema, or whose body does not match its digest is refused with a
:class:`CheckpointError` naming the file and the field; whoever wanted it folds from an older
checkpoint or from the start instead, and says so.

What the state holds only as a cache is left out of the body and rebuilt on use: the
deciders' ``caches``, the quota tree, the admitter's request memo, the workload reference
memo and the TAS topology trees (:data:`DERIVED`). Everything else, heaps and insertion
orders included, comes back as it was: a loaded state folds and decides exactly as the state
it was written from (``tests/unit/test_checkpoint_format.py``).

The file name carries the position and the code tag: ``<seq, 12 digits>-<tag>.ckpt``.
``kueue-es replay --write-checkpoints`` makes them every ``--checkpoint-every`` events (in
``<log>.checkpoints/`` by default); ``--from``, ``--to`` and ``--jobs`` start folds from them;
``--verify-checkpoints`` folds from the start and compares each with the fresh fold; ``kueue-es
service ROLE --checkpoints DIR`` starts a decider from the newest one whose log identity
matches the stream (``services.runtime.StartPoint``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import operator
import os
import sys
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

import msgspec

from kueue_es import __version__, deciders
from kueue_es.events import models, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState, Order, Queued, Ready, WorkloadState, wire
from kueue_es.projections.partitions import Partitions
from kueue_es.projections.topology import TopologyState
from kueue_es.services.runtime import StartPoint, message_digest

SUFFIX = ".ckpt"
FORMAT: Final = "kueue-es-checkpoint"
FORMAT_VERSION: Final = 1
MAX_HEADER = 1 << 16  # bytes: a header line longer than this is not one of ours

# Fields that are caches, not state: never written, rebuilt on use after a load.
DERIVED: Final[dict[type, frozenset[str]]] = {
    # ``partitions`` (issue 18) is rebuilt from the rest (its transits are the state's ``transits``)
    ClusterState: frozenset({"caches", "quota_tree", "partitions", "carried_seq", "carried_parked"}),
    WorkloadState: frozenset(
        {
            "requests_memo",
            "requests_memo_workload",
            "requests_memo_cq",
            "requests_memo_config",
            "requests_memo_devices",
            "shape_memo",
            "_ref",
            "_ref_of",
            "key",
        }
    ),
    TopologyState: frozenset({"_cache"}),
    batches.BatchVerifier: frozenset({"judge"}),  # the fold's partition rule, wired on load
}


class CheckpointError(ValueError):
    """A checkpoint file that is refused; the message names the file and the field."""


def code_tag() -> str:
    """``<kueue-es version>-<digest>``: the digest covers each role's logic version and the schema."""
    logic = ";".join(f"{role}={d.logic_version}" for role, d in sorted(deciders.BY_ROLE.items()))
    digest = hashlib.sha256(f"{logic};schema={types.SCHEMA_VERSION}".encode()).hexdigest()[:12]
    return f"{__version__}-{digest}".replace("/", "_")


def default_dir(source: Path) -> Path:
    """``<source>.checkpoints`` beside a log file or nats store directory."""
    source = source.resolve()
    return source.parent / f"{source.name}.checkpoints"


@dataclass(frozen=True, order=True)
class Checkpoint:
    """One checkpoint file: the state after folding #1..#``seq``."""

    seq: int
    path: Path


def name(seq: int) -> str:
    """The file name of the checkpoint at ``seq`` made by this code."""
    return f"{seq:012d}-{code_tag()}{SUFFIX}"


def find(directory: Path | None) -> list[Checkpoint]:
    """This code's checkpoints in ``directory``, by position (none when it does not exist).
    Chosen by name only: :func:`load` checks the contents."""
    if directory is None or not directory.is_dir():
        return []
    tag = code_tag()
    found = []
    for path in directory.iterdir():
        seq, _, rest = path.name.partition("-")
        if rest == f"{tag}{SUFFIX}" and seq.isdigit():
            found.append(Checkpoint(seq=int(seq), path=path))
    return sorted(found)


def latest_at_or_before(checkpoints: list[Checkpoint], seq: int) -> Checkpoint | None:
    """The checkpoint of the highest position not after ``seq``."""
    best = None
    for checkpoint in checkpoints:
        if checkpoint.seq <= seq:
            best = checkpoint
    return best


# --- the header -------------------------------------------------------------------------------


class LogIdentity(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which log a checkpoint was folded from: the SHA-256 (``services.runtime.message_digest``,
    over subject and data) of its message #1 and of the message at the checkpoint's position.
    A log whose messages there differ is another log, and the checkpoint is not used on it."""

    first_sha256: str
    at_sha256: str


class Verification(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a snapshot (a checkpoint on the bus, :mod:`kueue_es.snapshots`) was verified: the fold from
    the previous verified snapshot at ``from_seq`` (0: from message #1), whose body's SHA-256 is
    ``previous_sha256`` ("" from #1), re-ran every DecisionRecord whose basis lies in
    ``from_seq``..``through_seq`` and whose head is at or before ``through_seq``: ``matched`` matched,
    ``unverifiable`` could not be re-run (another logic version, a scenario seed), none differed and
    the log there had no gap and no orphan. ``at``: when (RFC 3339, UTC)."""

    from_seq: int
    through_seq: int
    matched: int
    unverifiable: int
    at: str
    previous_sha256: str


class Header(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The first line of a checkpoint file (JSON). ``seq``: the position; ``head_seqs``: the last
    sequence on each partition's head subject (``kq.dec.<p>.head``) up to it, any message there;
    ``log``: None when the writer did not know its log (then no service starts from it).
    ``sections``: other services' folds after the state's body, in order (name -> bytes; the body's
    length and digest cover them too); ``verified``: set on a snapshot the compactor verified."""

    format: str
    format_version: int
    kueue_es_version: str
    code_tag: str
    schema_sha256: str
    seq: int
    log: LogIdentity | None
    head_seqs: dict[str, int]
    body_length: int
    body_sha256: str
    sections: dict[str, int] = msgspec.field(default_factory=dict)
    verified: Verification | None = None


class _Probe(msgspec.Struct):
    """What the header of any version of any format has, read first to name a wrong format."""

    format: str = ""
    format_version: int = 0


# --- the body: the state's fields as typed Structs --------------------------------------------


def _mirror(cls: type, struct_name: str, **overrides: Any) -> Any:
    """A Struct with ``cls``'s dataclass fields but :data:`DERIVED`, in order, typed as declared
    (``overrides``: other types for some fields), encoded as an array, every field required."""
    hints = typing.get_type_hints(cls)
    skip = DERIVED.get(cls, frozenset())
    fields = [(f.name, overrides.get(f.name, hints[f.name])) for f in dataclasses.fields(cls) if f.name not in skip]
    for field_name, hint in fields:
        if hint is Any:
            raise TypeError(f"{cls.__name__}.{field_name} is typed Any: name it in DERIVED or give it a type")
    return msgspec.defstruct(struct_name, fields, array_like=True, forbid_unknown_fields=True, module=__name__)


class ReadySnapshot(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A :class:`Ready`: its heap as it is (stale entries included) and, for each live order
    key in ``live``'s order, its index in the heap (a live key is that very heap entry)."""

    heap: list[Order]
    live: list[int]


class QueuedSnapshot(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A :class:`Queued`, field by field."""

    ready: ReadySnapshot
    parked: dict[str, tuple[int, Order]]
    requeued: dict[str, tuple[int, Order]]
    trigger: int
    last_parked: int


class BatchesSnapshot(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A :class:`batches.BatchVerifier` without its partition rule (``judge``, the fold's own,
    wired again on load)."""

    open: batches._OpenBatch | None
    orphaned: int


# ``queued_for`` is None, True (the workload object itself, as the fold sets it) or another object.
WorkloadSnapshot = _mirror(WorkloadState, "WorkloadSnapshot", queued_for=models.Workload | bool | None)
TopologySnapshot = _mirror(TopologyState, "TopologySnapshot")
Snapshot = _mirror(
    ClusterState,
    "Snapshot",
    workloads=dict[str, WorkloadSnapshot],  # type: ignore[valid-type]
    queued=dict[tuple[str, str], QueuedSnapshot],
    topology=TopologySnapshot,
    batches=BatchesSnapshot,
)
_WL_FIELDS = tuple(WorkloadSnapshot.__struct_fields__)
_WL_GET = operator.attrgetter(*_WL_FIELDS)
_WL_QUEUED_FOR = _WL_FIELDS.index("queued_for")
_TOPOLOGY_FIELDS = tuple(TopologySnapshot.__struct_fields__)
_STATE_FIELDS = tuple(Snapshot.__struct_fields__)
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Snapshot)
_header_encoder = msgspec.json.Encoder()


@cache
def schema_digest() -> str:
    """SHA-256 of the body's schema (every field's name and type, nested): a body written by
    code whose state had other fields is refused even when the version string is the same."""
    schema = msgspec.json.schema(Snapshot)
    return hashlib.sha256(msgspec.json.encode(schema, order="sorted")).hexdigest()


def _ready(ready: Ready) -> ReadySnapshot:
    where = {id(order): n for n, order in enumerate(ready.heap)}
    return ReadySnapshot(heap=ready.heap, live=[where[id(order)] for order in ready.live.values()])


def _queued(queued: Queued) -> QueuedSnapshot:
    return QueuedSnapshot(
        ready=_ready(queued.ready),
        parked=queued.parked,
        requeued=queued.requeued,
        trigger=queued.trigger,
        last_parked=queued._last_parked,
    )


def _workload(wl: WorkloadState) -> Any:
    values = list(_WL_GET(wl))
    queued_for = values[_WL_QUEUED_FOR]
    values[_WL_QUEUED_FOR] = True if queued_for is not None and queued_for is wl.workload else queued_for
    return WorkloadSnapshot(*values)


def snapshot(state: ClusterState) -> Any:
    """The :data:`Snapshot` of ``state`` (sharing its objects: encode it before folding on)."""
    values: dict[str, Any] = {}
    for field_name in _STATE_FIELDS:
        values[field_name] = getattr(state, field_name)
    values["workloads"] = {key: _workload(wl) for key, wl in state.workloads.items()}
    values["queued"] = {key: _queued(q) for key, q in state.queued.items()}
    topology = state.topology
    values["topology"] = TopologySnapshot(*(getattr(topology, f) for f in _TOPOLOGY_FIELDS))
    values["batches"] = BatchesSnapshot(open=state.batches.open, orphaned=state.batches.orphaned)
    return Snapshot(**values)


class SnapshotError(ValueError):
    """A snapshot that decodes but breaks an invariant of the state it describes."""


def _check_heap(heap: list[Any], where: str) -> None:
    """Raise :class:`SnapshotError` unless ``heap`` has the min-heap order ``heapq`` relies on."""
    for n in range(1, len(heap)):
        if heap[n] < heap[(n - 1) // 2]:
            raise SnapshotError(f"{where}: not in heap order at item {n}")


def _restore_ready(snap: ReadySnapshot, where: str) -> Ready:
    _check_heap(snap.heap, f"{where}.ready.heap")
    ready = Ready()
    ready.heap = snap.heap
    ready.live = {}
    for n in snap.live:
        if not 0 <= n < len(snap.heap):
            raise SnapshotError(f"{where}.ready.live: index {n} is outside the heap")
        order = snap.heap[n]
        ready.live[order[-1]] = order
    return ready


def _restore_queued(snap: QueuedSnapshot, where: str) -> Queued:
    if snap.last_parked >= 0:  # it says ``parked`` is in parking order, up to it
        seqs = [seq for seq, _ in snap.parked.values()]
        if seqs != sorted(seqs) or any(seq > snap.last_parked for seq in seqs):
            raise SnapshotError(f"{where}.last_parked: {snap.last_parked}, but parked is not in that order")
    queued = Queued()
    queued.ready = _restore_ready(snap.ready, where)
    queued.parked, queued.requeued = snap.parked, snap.requeued
    queued.trigger, queued._last_parked = snap.trigger, snap.last_parked
    return queued


_WL_CACHES = tuple(sorted(DERIVED[WorkloadState] - {"key"}))


def _restore_workload(snap: Any) -> WorkloadState:
    wl: WorkloadState = object.__new__(WorkloadState)  # every field is set below: no defaults to make
    for field_name, value in zip(_WL_FIELDS, msgspec.structs.astuple(snap), strict=True):
        setattr(wl, field_name, value)
    for field_name in _WL_CACHES:
        setattr(wl, field_name, None)
    wl.key = wl.workload.key
    if wl.queued_for is True:
        wl.queued_for = wl.workload
    elif wl.queued_for is False:
        wl.queued_for = None
    return wl


def restore(snap: Any) -> ClusterState:
    """The :class:`ClusterState` a :data:`Snapshot` describes (its caches empty)."""
    state = ClusterState()
    for field_name in _STATE_FIELDS:
        setattr(state, field_name, getattr(snap, field_name))
    state.workloads = {key: _restore_workload(wl) for key, wl in snap.workloads.items()}
    state.queued = {key: _restore_queued(q, f"queued[{key!r}]") for key, q in snap.queued.items()}
    for kind, heap in enumerate(state.timer_heaps):
        _check_heap(heap, f"timer_heaps[{kind}]")
    topology = TopologyState()
    for field_name in _TOPOLOGY_FIELDS:
        setattr(topology, field_name, getattr(snap.topology, field_name))
    state.topology = topology
    state.batches = batches.BatchVerifier(open=snap.batches.open, orphaned=snap.batches.orphaned)
    wire(state)
    state.partitions = Partitions.rebuilt(state)
    return state


_topology_decoder = msgspec.msgpack.Decoder(TopologySnapshot)


def dump_topology(topology: TopologyState) -> bytes:
    """A :class:`TopologyState` alone as msgpack (the watcher's own, in a snapshot's section)."""
    return _encoder.encode(TopologySnapshot(*(getattr(topology, f) for f in _TOPOLOGY_FIELDS)))


def load_topology(data: bytes | memoryview, *, where: str) -> TopologyState:
    """The :class:`TopologyState` :func:`dump_topology` wrote; CheckpointError naming ``where``."""
    try:
        snap = _topology_decoder.decode(data)
    except msgspec.DecodeError as err:
        raise CheckpointError(f"{where}: topology does not decode: {err}") from None
    topology = TopologyState()
    for field_name in _TOPOLOGY_FIELDS:
        setattr(topology, field_name, getattr(snap, field_name))
    return topology


def dumps(state: ClusterState) -> bytes:
    """The body of a checkpoint of ``state``: its :data:`Snapshot` as msgpack. Two states fold
    and decide alike when their bodies are the same bytes (``--verify-checkpoints`` compares them)."""
    with _gc_paused():
        return _encoder.encode(snapshot(state))


class _QueuedContent(msgspec.Struct, array_like=True):
    entries: list[tuple[Order, int]]  # (queue order key, parked_seq or 0), in order


def state_digest(state: ClusterState) -> str:
    """SHA-256 of what ``state`` holds, whatever the deciders did while reading it: :func:`dumps`
    with each LocalQueue as its queued workloads and their parked marks (not how its heap and
    split into ready and parked came to be laid out, which depends on when a decider looked),
    and the deadline heaps as their current entries. Two services that folded the same log
    have the same state digest, whichever checkpoint either started from."""
    snap = snapshot(state)
    queued = {}
    for queue, q in state.queued.items():
        entries = [(order, 0) for order in q.ready.live.values() if order[-1] not in q.requeued]
        entries.extend((order, seq) for seq, order in (*q.requeued.values(), *q.parked.values()))
        queued[queue] = _QueuedContent(entries=sorted(entries))
    timers = []
    for kind, heap in enumerate(state.timer_heaps):
        current = set()
        for base, workload in heap:
            wl = state.workloads.get(workload)
            if wl is not None and wl.timer_basis is not None and wl.timer_basis[kind] == base:
                current.add((base, workload))
        timers.append(sorted(current))
    snap = msgspec.structs.replace(snap, queued={}, timer_heaps=((), (), ()))
    return hashlib.sha256(_encoder.encode((snap, sorted(queued.items()), timers))).hexdigest()


def loads(body: bytes | memoryview, *, where: str = "checkpoint body") -> ClusterState:
    """The state a body holds; raises :class:`CheckpointError` naming ``where`` and the field
    (msgspec's path, ``$[n]`` being the n-th field of :data:`Snapshot`) when it does not decode."""
    with _gc_paused():  # millions of new containers: the collector would scan the heap again and again
        try:
            return restore(_decoder.decode(body))
        except msgspec.DecodeError as err:
            raise CheckpointError(f"{where}: body does not decode as a state snapshot: {err}") from None
        except SnapshotError as err:
            raise CheckpointError(f"{where}: body: {err}") from None


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (on again after, if it was on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# --- files ------------------------------------------------------------------------------------


def write(
    directory: Path,
    seq: int,
    state: ClusterState,
    *,
    log: LogIdentity | None = None,
    head_seqs: dict[str, int] | None = None,
) -> Path:
    """Write the checkpoint of ``state`` at position ``seq`` (atomically: a reader never sees half a
    file). ``log``: the log's identity (without it no service starts from the checkpoint);
    ``head_seqs``: the last sequence on each head subject up to ``seq`` (default: the state's heads)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name(seq)
    data = assemble(seq, dumps(state), log=log, head_seqs=dict(state.heads if head_seqs is None else head_seqs))
    partial = path.with_suffix(f".{os.getpid()}.partial")
    with partial.open("wb") as out:
        out.write(data)
    partial.replace(path)
    return path


def assemble(
    seq: int,
    body: bytes,
    *,
    log: LogIdentity | None,
    head_seqs: dict[str, int],
    sections: dict[str, bytes] | None = None,
    verified: Verification | None = None,
) -> bytes:
    """A whole checkpoint (header line, then ``body``, a state's :func:`dumps`, then each of
    ``sections`` in order) at position ``seq``: the bytes of a file or of a snapshot object."""
    sections = sections or {}
    parts = [body, *sections.values()]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    header = Header(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        kueue_es_version=__version__,
        code_tag=code_tag(),
        schema_sha256=schema_digest(),
        seq=seq,
        log=log,
        head_seqs=dict(head_seqs),
        body_length=sum(len(part) for part in parts),
        body_sha256=digest.hexdigest(),
        sections={key: len(value) for key, value in sections.items()},
        verified=verified,
    )
    return b"".join([_header_encoder.encode(header), b"\n", *parts])


def decode(data: bytes, *, where: str) -> tuple[Header, ClusterState, dict[str, memoryview]]:
    """The header, state and other sections of a whole checkpoint (:func:`assemble`), every check
    passed (header, body length and SHA-256, the state's decoding). Raises :class:`CheckpointError`
    naming ``where``."""
    end = data.find(b"\n", 0, MAX_HEADER)
    header = _check_header(Path(where), data[: end + 1] if end >= 0 else data[:MAX_HEADER])
    body = memoryview(data)[end + 1 :]
    if len(body) != header.body_length:
        raise CheckpointError(f"{where}: header.body_length: {header.body_length}, the body has {len(body)} bytes")
    if hashlib.sha256(body).hexdigest() != header.body_sha256:
        raise CheckpointError(f"{where}: header.body_sha256: the body does not match its digest (changed?)")
    rest = sum(header.sections.values())
    if any(length < 0 for length in header.sections.values()) or rest > len(body):
        raise CheckpointError(f"{where}: header.sections: {header.sections} do not fit in the body")
    state_end = len(body) - rest
    sections: dict[str, memoryview] = {}
    at = state_end
    for key, length in header.sections.items():
        sections[key] = body[at : at + length]
        at += length
    return header, loads(body[:state_end], where=where), sections


def read_header(path: Path) -> Header:
    """The header of the checkpoint file at ``path``, checked against this code: format, format
    version, code tag and schema. Raises :class:`CheckpointError` naming the file and field."""
    try:
        with path.open("rb") as f:
            line = f.readline(MAX_HEADER)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot be read: {err}") from None
    return _check_header(path, line)


def _check_header(path: Path, line: bytes) -> Header:
    if not line.endswith(b"\n"):
        raise CheckpointError(f"{path}: header: no header line (not a {FORMAT} file: a pickle, or truncated?)")
    try:
        probe = msgspec.json.decode(line, type=_Probe)
    except msgspec.DecodeError as err:
        raise CheckpointError(f"{path}: header: does not decode ({err}): not a {FORMAT} file") from None
    if probe.format != FORMAT:
        raise CheckpointError(f"{path}: header.format: {probe.format!r}, expected {FORMAT!r}")
    if probe.format_version != FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: header.format_version: {probe.format_version}, this kueue-es reads {FORMAT_VERSION}"
        )
    try:
        header = msgspec.json.decode(line, type=Header)
    except msgspec.DecodeError as err:
        raise CheckpointError(f"{path}: header: {err}") from None
    if header.code_tag != code_tag():
        raise CheckpointError(
            f"{path}: header.code_tag: {header.code_tag!r} (kueue-es {header.kueue_es_version}), "
            f"this code is {code_tag()!r}"
        )
    if header.schema_sha256 != schema_digest():
        raise CheckpointError(f"{path}: header.schema_sha256: the state's fields differ from this code's")
    return header


def open_checkpoint(path: Path) -> tuple[Header, ClusterState]:
    """The header and state of the checkpoint file at ``path``, every check passed: header
    (:func:`read_header`), body length and SHA-256, body decoding. Raises :class:`CheckpointError`."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CheckpointError(f"{path}: cannot be read: {err}") from None
    header, state, _ = decode(data, where=str(path))
    return header, state


def load(checkpoint: Checkpoint) -> ClusterState:
    """The state a checkpoint holds, every check passed (:func:`open_checkpoint`); also refused
    when its header's position is not the one its name gives. Raises :class:`CheckpointError`."""
    header, state = open_checkpoint(checkpoint.path)
    if header.seq != checkpoint.seq:
        raise CheckpointError(f"{checkpoint.path}: header.seq: {header.seq}, the file name says {checkpoint.seq}")
    return state


def load_at_or_before(
    checkpoints: list[Checkpoint], seq: int, *, warn: Callable[[str], None]
) -> tuple[Checkpoint, Header, ClusterState] | None:
    """The newest checkpoint at or before ``seq`` that loads, with its header and state; each one
    refused on the way is passed to ``warn`` (with where the fold starts instead). None: none loads."""
    candidates = [c for c in checkpoints if c.seq <= seq]
    while candidates:
        checkpoint = candidates.pop()
        try:
            header, state = open_checkpoint(checkpoint.path)
            if header.seq != checkpoint.seq:
                raise CheckpointError(
                    f"{checkpoint.path}: header.seq: {header.seq}, the file name says {checkpoint.seq}"
                )
        except CheckpointError as err:
            instead = f"checkpoint #{candidates[-1].seq}" if candidates else "the start"
            warn(f"checkpoint refused: {err}; folding from {instead} instead")
            continue
        return checkpoint, header, state
    return None


def start_point(directory: Path, *, warn: Callable[[str], None]) -> StartPoint | None:
    """The newest checkpoint in ``directory`` that loads and names its log, as a service's
    :class:`~kueue_es.services.runtime.StartPoint` (the service then checks that the log is the
    stream's). Each checkpoint passed over, and finding none, is told to ``warn``; None: fold from
    the start."""
    found = find(directory)
    if not found:
        warn(f"no checkpoint of this code ({code_tag()}) in {directory}: folding from the start")
    while found:
        loaded = load_at_or_before(found, found[-1].seq, warn=warn)
        if loaded is None:
            return None
        checkpoint, header, state = loaded
        found = [c for c in found if c.seq < checkpoint.seq]
        if header.log is None:
            instead = f"checkpoint #{found[-1].seq}" if found else "the start"
            warn(f"checkpoint {checkpoint.path}: header.log: names no log; folding from {instead} instead")
            continue
        return StartPoint(
            state=state,
            seq=header.seq,
            head_seqs=header.head_seqs,
            first_sha256=header.log.first_sha256,
            at_sha256=header.log.at_sha256,
            origin=str(checkpoint.path),
        )
    return None


def write_from(
    messages: Iterable[LogMessage], directory: Path, *, every: int = 0, on_message: Callable[[], None] | None = None
) -> list[int]:
    """Fold ``messages`` (a log from #1, in order) as the services fold it (``fold_message``: no
    decision re-run, so faster than ``replay --write-checkpoints``, and nothing checked) and
    write a checkpoint every ``every`` events (0: none on the way) and at the last message.
    Returns the positions written. ``on_message``: called after each message (progress)."""
    from kueue_es.services.runtime import fold_message

    state = ClusterState()
    first: LogMessage | None = None
    current: LogMessage | None = None
    head_seqs: dict[str, int] = {}
    written: list[int] = []

    def checkpoint() -> None:
        assert current is not None
        log = identity_of(first, current) if first is not None else None
        write(directory, current.seq, state, log=log, head_seqs=dict(head_seqs))
        written.append(current.seq)

    mark = every
    for message in messages:
        if message.seq == 1:
            first = message
        current = message
        partition = batches.partition_of(message.subject)
        if partition is not None and subjects.head_token(message.subject) is not None:  # any role's head
            head_seqs[partition] = message.seq
        fold_message(state, message)
        if every and message.seq >= mark:
            checkpoint()
            mark = (message.seq // every + 1) * every
        if on_message is not None:
            on_message()
    if current is not None and (not written or written[-1] != current.seq):
        checkpoint()
    return written


def run_command(args: Any) -> int:
    """``kueue-es checkpoint``: fold the log of ``--file``, ``--store`` or ``--nats`` and write
    checkpoints into ``--checkpoints`` (default ``<log>.checkpoints``) every ``--every`` events
    and at its end. Exit 0, or 2 when the arguments do not name one log."""
    import asyncio

    from kueue_es.replay_ranges import Source

    if sum(x is not None for x in (args.nats, args.store, args.file)) != 1:
        print("error: give one of --nats URL, --store DIR or --file FILE", file=sys.stderr)
        return 2
    if args.nats is not None and args.checkpoints is None:
        print("error: with --nats, give --checkpoints DIR", file=sys.stderr)
        return 2
    directory: Path = args.checkpoints or default_dir(args.file or args.store)

    def run(source: Source, last: int) -> list[int]:
        return write_from(source.messages(last=last), directory, every=args.every)

    async def last_seq(url: str) -> int:
        from kueue_es.events.bus import nats as nats_bus

        bus = await nats_bus.connect(url, create_stream=False)
        try:
            return await bus.last_seq()
        finally:
            await bus.close()

    async def from_store() -> list[int]:
        from kueue_es.events.bus.server import open_stopped_store

        async with open_stopped_store(args.store) as server:
            last = await last_seq(server.url)
            return await asyncio.to_thread(run, Source(nats_url=server.url), last)

    if args.file is not None:
        written = run(Source(file=args.file), 0)
    elif args.store is not None:
        written = asyncio.run(from_store())
    else:
        written = run(Source(nats_url=args.nats), asyncio.run(last_seq(args.nats)))
    print(f"checkpoints written at {', '.join(f'#{p}' for p in written) or 'none (an empty log)'} in {directory}")
    return 0


def identity_of(first: LogMessage, at: LogMessage) -> LogIdentity:
    """The :class:`LogIdentity` of a log whose message #1 is ``first`` and whose message at the
    checkpoint's position is ``at``."""
    return LogIdentity(first_sha256=message_digest(first), at_sha256=message_digest(at))


def differences(left: object, right: object, path: str = "state", *, limit: int = 5) -> list[str]:
    """Where two states differ (up to ``limit`` paths), structurally: dicts in order, sets as sets,
    msgspec Structs by value, any other object by its attributes (each pair of objects once, so
    shared and linked structures are walked without recursion). [] when they are the same."""
    out: list[str] = []
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[object, object, str]] = [(left, right, path)]
    while stack and len(out) < limit:
        a, b, where = stack.pop()
        if type(a) is not type(b):
            out.append(f"{where}: {type(a).__name__} vs {type(b).__name__}")
            continue
        if a is None or isinstance(a, set | frozenset | int | str | float | bytes | bool):
            if a != b:
                out.append(f"{where}: {a!r:.80} vs {b!r:.80}")
            continue
        if isinstance(a, msgspec.Struct):
            if a != b:
                out.append(f"{where}: {type(a).__name__} differs")
            continue
        if (id(a), id(b)) in seen:
            continue
        seen.add((id(a), id(b)))
        if isinstance(a, dict):
            assert isinstance(b, dict)
            if list(a) != list(b):
                out.append(f"{where}: keys differ (or their order)")
                continue
            stack.extend((a[k], b[k], f"{where}[{k!r}]") for k in reversed(list(a)))
        elif isinstance(a, list | tuple):
            assert isinstance(b, list | tuple)
            if len(a) != len(b):
                out.append(f"{where}: {len(a)} vs {len(b)} items")
                continue
            stack.extend((x, y, f"{where}[{n}]") for n, (x, y) in reversed(list(enumerate(zip(a, b, strict=True)))))
        else:
            skip = DERIVED.get(type(a), frozenset())
            names = [n for n in getattr(a, "__dict__", {}) if n not in skip]
            for cls in type(a).__mro__:
                names.extend(
                    n
                    for n in getattr(cls, "__slots__", ())
                    if n not in names and not n.startswith("__") and n not in skip
                )
            stack.extend((getattr(a, n, None), getattr(b, n, None), f"{where}.{n}") for n in reversed(names))
    return out
