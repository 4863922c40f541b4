"""Checkpoints of the folded state: a cache beside the log, never a source of truth.

A checkpoint is the pickled :class:`ClusterState` after folding the log up to a
sequence (the *position*: the last message fed, whatever its batch verifier holds).
Its file name carries the position and a tag of the code that made it, the kueue-es
version and a digest of the deciders' logic versions and the event schema
(:func:`code_tag`): a checkpoint of other code is never used. ``kueue-es replay
--write-checkpoints`` makes them every ``--checkpoint-every`` events; ``--from``,
``--to`` and ``--jobs`` start folds from them; ``--verify-checkpoints`` folds from
the start and compares each with the fresh fold. Only load checkpoints you made
(pickle runs code on load); they live in ``<log>.checkpoints/`` by default.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kueue_es import __version__, deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState

SUFFIX = ".ckpt"


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
    """This code's checkpoints in ``directory``, by position (none when it does not exist)."""
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


def dumps(state: ClusterState) -> bytes:
    """A state as checkpoint bytes."""
    return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def write(directory: Path, seq: int, state: ClusterState) -> Path:
    """Write the checkpoint of ``state`` at ``seq`` (atomically: a reader never sees half a file)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name(seq)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(dumps(state))
    partial.replace(path)
    return path


def load(checkpoint: Checkpoint) -> ClusterState:
    """The state a checkpoint holds."""
    state = pickle.loads(checkpoint.path.read_bytes())  # noqa: S301 - our own cache, made by this code (see above)
    if not isinstance(state, ClusterState):
        raise ValueError(f"{checkpoint.path} does not hold a ClusterState")
    return state


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
            names = list(getattr(a, "__dict__", {}))
            for cls in type(a).__mro__:
                names.extend(n for n in getattr(cls, "__slots__", ()) if n not in names and not n.startswith("__"))
            stack.extend((getattr(a, n, None), getattr(b, n, None), f"{where}.{n}") for n in reversed(names))
    return out
