"""The checkpoint file format: data only, checked on load (issue 13, point 3).

A checkpoint is a JSON header line and a msgpack body (``kueue_es.checkpoints``): a loaded
state must equal a fresh fold to the byte and fold and decide on exactly as it would; a body
that was changed, a pickle, or a header of another format version is refused, naming the
file and the field, and never runs code.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import msgspec
import pytest

from kueue_es import checkpoints, deciders
from kueue_es.bench import BASE_MS, core_log
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import fold_message

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"


@pytest.fixture(scope="module")
def messages() -> list[LogMessage]:
    return list(core_log(events=3_000, cohorts=2, queues_per_cohort=5, scale=0.5))


def demo_messages() -> list[LogMessage]:
    """The recorded preemption demo: preemptions, evictions and parked workloads in the state."""
    out = []
    for line in (FIXTURES / "demo-preempt.jsonl").read_text().splitlines():
        raw = json.loads(line)
        out.append(
            LogMessage(seq=raw["seq"], subject=raw["subject"], data=raw["data"].encode(), headers=raw["headers"])
        )
    return out


def fold(messages: list[LogMessage], state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for message in messages:
        fold_message(state, message)
    return state


def decisions(state: ClusterState) -> list[bytes]:
    """What every decider would decide on ``state`` (the deciders fill its caches on the way)."""
    return [
        msgspec.json.encode(list(d.decide(state, now_ms=BASE_MS + 3_600_000)))
        for _, d in sorted(deciders.BY_ROLE.items())
    ]


@pytest.mark.parametrize("source", ["core", "demo"])
def test_a_loaded_checkpoint_equals_a_fresh_fold_and_folds_on_alike(
    source: str, messages: list[LogMessage], tmp_path: Path
) -> None:
    log = messages if source == "core" else demo_messages()
    for cut in (len(log) // 3, 2 * len(log) // 3):
        # The deciders fill caches (never written) and move queue entries and timers as they read
        # (the same for the same log): the fresh fold is decided on at the same point.
        written = fold(log[:cut])
        decisions(written)
        path = checkpoints.write(tmp_path, cut, written, log=checkpoints.identity_of(log[0], log[cut - 1]))
        loaded = checkpoints.load(checkpoints.Checkpoint(seq=cut, path=path))
        fresh = fold(log[:cut])
        decisions(fresh)
        assert loaded is not written and checkpoints.dumps(loaded) == checkpoints.dumps(written)
        assert checkpoints.dumps(loaded) == checkpoints.dumps(fresh)
        assert checkpoints.differences(loaded, fresh) == []
        assert loaded.workloads and loaded.caches == {} and loaded.quota_tree is None
        assert decisions(loaded) == decisions(fresh)
        # Folding on from the checkpoint and from the start gives the same state and decisions.
        fold(log[cut:], loaded)
        fold(log[cut:], fresh)
        assert checkpoints.dumps(loaded) == checkpoints.dumps(fresh)
        assert decisions(loaded) == decisions(fresh)


def test_a_changed_state_has_other_bytes(messages: list[LogMessage]) -> None:
    state = fold(messages[:2_000])
    before = checkpoints.dumps(state)
    next(iter(state.workloads.values())).preempted_count += 1
    assert checkpoints.dumps(state) != before


def test_the_header_is_one_json_line_naming_format_version_log_and_digest(
    messages: list[LogMessage], tmp_path: Path
) -> None:
    state = fold(messages[:1_000])
    path = checkpoints.write(tmp_path, 1_000, state, log=checkpoints.identity_of(messages[0], messages[999]))
    header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    assert header["format"] == "kueue-es-checkpoint" and header["format_version"] == 1
    assert header["seq"] == 1_000 and header["code_tag"] == checkpoints.code_tag()
    assert header["log"]["at_sha256"] != header["log"]["first_sha256"]
    assert len(header["body_sha256"]) == 64
    assert header["head_seqs"] == state.heads


def _written(messages: list[LogMessage], directory: Path) -> checkpoints.Checkpoint:
    checkpoints.write(directory, 1_500, fold(messages[:1_500]))
    return checkpoints.find(directory)[0]


def test_a_tampered_body_is_refused_naming_file_and_field(messages: list[LogMessage], tmp_path: Path) -> None:
    checkpoint = _written(messages, tmp_path)
    data = bytearray(checkpoint.path.read_bytes())
    data[-10] ^= 0x01
    checkpoint.path.write_bytes(bytes(data))
    with pytest.raises(checkpoints.CheckpointError, match=r"header\.body_sha256") as err:
        checkpoints.load(checkpoint)
    assert str(checkpoint.path) in str(err.value)


def test_a_body_that_does_not_decode_is_refused_even_with_a_matching_digest(
    messages: list[LogMessage], tmp_path: Path
) -> None:
    import hashlib

    checkpoint = _written(messages, tmp_path)
    line = checkpoint.path.read_bytes().split(b"\n", 1)[0]
    header = json.loads(line)
    body = msgspec.msgpack.encode([1, 2, 3])
    header.update(body_length=len(body), body_sha256=hashlib.sha256(body).hexdigest())
    checkpoint.path.write_bytes(json.dumps(header).encode() + b"\n" + body)
    with pytest.raises(checkpoints.CheckpointError, match="body does not decode"):
        checkpoints.load(checkpoint)


class _Touch:
    """Pickled, loading it would create a file: what a planted pickle checkpoint could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def test_a_pickle_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / checkpoints.name(1_500)
    path.write_bytes(pickle.dumps(_Touch(marker)))
    with pytest.raises(checkpoints.CheckpointError, match=r"header") as err:
        checkpoints.load(checkpoints.Checkpoint(seq=1_500, path=path))
    assert str(path) in str(err.value)
    assert not marker.exists()


def test_another_format_version_or_code_is_refused(messages: list[LogMessage], tmp_path: Path) -> None:
    checkpoint = _written(messages, tmp_path)
    line, body = checkpoint.path.read_bytes().split(b"\n", 1)
    for change, field in (
        ({"format_version": 99}, r"header\.format_version: 99"),
        ({"format": "other"}, r"header\.format: 'other'"),
        ({"code_tag": "0.0.1-abc"}, r"header\.code_tag"),
        ({"schema_sha256": "0" * 64}, r"header\.schema_sha256"),
        ({"seq": 7}, r"header\.seq: 7"),
    ):
        header = {**json.loads(line), **change}
        checkpoint.path.write_bytes(json.dumps(header).encode() + b"\n" + body)
        with pytest.raises(checkpoints.CheckpointError, match=field):
            checkpoints.load(checkpoint)


def test_a_refused_checkpoint_falls_back_to_an_older_one(messages: list[LogMessage], tmp_path: Path) -> None:
    checkpoints.write(tmp_path, 1_000, fold(messages[:1_000]))
    checkpoints.write(tmp_path, 2_000, fold(messages[:2_000]))
    found = checkpoints.find(tmp_path)
    found[1].path.write_bytes(b"garbage")
    said: list[str] = []
    got = checkpoints.load_at_or_before(found, 2_500, warn=said.append)
    assert got is not None and got[0].seq == 1_000
    assert len(said) == 1 and str(found[1].path) in said[0] and "folding from checkpoint #1000" in said[0]
    found[0].path.write_bytes(b"")
    said.clear()
    assert checkpoints.load_at_or_before(found, 2_500, warn=said.append) is None
    assert "folding from the start" in said[-1]


def test_a_body_out_of_heap_order_is_refused(messages: list[LogMessage], tmp_path: Path) -> None:
    state = fold(messages[:1_500])
    ready = next(q.ready for q in state.queued.values() if len({o for o in q.ready.heap}) >= 2)
    heap = ready.heap
    last = max(range(len(heap)), key=lambda n: heap[n])
    heap[0], heap[last] = heap[last], heap[0]  # still the same entries, no longer a heap
    path = checkpoints.write(tmp_path, 1_500, state)
    with pytest.raises(checkpoints.CheckpointError, match=r"ready\.heap: not in heap order"):
        checkpoints.load(checkpoints.Checkpoint(seq=1_500, path=path))
