"""Snapshots beside the log, verified by replay, and purges below them (kueue_es.snapshots), on a real
nats-server: the recorded preemption demo (tests/fixtures/logs/demo-preempt.jsonl) written in two
parts, a snapshot of the first verified and written, the log purged below it, and the services'
start points and ``replay`` taken from it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import msgspec
import nats
import nats.js.errors
import pytest

from kueue_es import checkpoints, deciders, snapshots
from kueue_es.events import codec, types
from kueue_es.events.bus import base, permissions, server
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.replay import EXIT_OK, check_log
from kueue_es.services.publisher import core as publisher_core
from kueue_es.services.runtime import DeciderLoop, LogPurgedError, StartPoint
from tests.bus.test_auth import auth, bus_as, refused, secured  # noqa: F401  (fixtures)
from tests.unit.test_golden_log import _load

NOW = 1_700_000_000.0


def golden() -> list[LogMessage]:
    return _load("demo-preempt.jsonl")


def split_point(messages: list[LogMessage]) -> int:
    """A position in the middle of the log just before a DecisionRecord decided on it (basis = the
    position), so the decisions after it can all be re-run from a snapshot there."""
    candidates = []
    for message in messages:
        event = codec.decode(message.data)
        if isinstance(event, types.DecisionRecord) and event.basis_seq == message.seq - 1:
            candidates.append(message.seq - 1)
    assert candidates, "the demo log has no record decided on the message just before it"
    return candidates[len(candidates) // 2]


@pytest.fixture(scope="module")
def plain_server() -> Iterator[server.NatsServer]:
    with server.NatsServer() as running:
        yield running


async def _fresh(url: str) -> None:
    nc = await nats.connect(url)
    try:
        jsm = nc.jsm(timeout=10)
        for name in (base.STREAM_NAME, nats_bus.SNAPSHOT_STREAM, nats_bus.PUBLIC_STREAM_NAME):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await jsm.delete_stream(name)
            for _ in range(100):  # gone before the next test makes it again
                try:
                    await jsm.stream_info(name)
                except nats.js.errors.NotFoundError:
                    break
                await asyncio.sleep(0.05)
    finally:
        await nc.close()


async def _publish(url: str, messages: list[LogMessage]) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for message in messages:
            ack = await js.publish(message.subject, message.data, headers=dict(message.headers))
            assert ack.seq == message.seq
    finally:
        await nc.close()


@pytest.fixture
async def bus(plain_server: server.NatsServer) -> AsyncIterator[nats_bus.NatsBus]:
    await _fresh(plain_server.url)
    opened = await nats_bus.connect(plain_server.url)
    await opened.ensure_snapshot_bucket()
    try:
        yield opened
    finally:
        await opened.close()


SETTLED = snapshots.Settings(every=1, settle=0.0)


def test_the_dispatcher_view_from_a_snapshot_is_the_view_folded_from_the_start() -> None:
    """Fold to N from #1, or fold to K, dump, load and fold K+1..N: the same view, for every K."""
    messages = golden()
    whole = snapshots.DispatchFold()
    for message in messages:
        whole.feed(message)
    expected = whole.dumps()
    for cut in range(0, len(messages) + 1, 7):
        part = snapshots.DispatchFold()
        for message in messages[:cut]:
            part.feed(message)
        resumed = snapshots.DispatchFold.loads(part.dumps(), where=f"cut {cut}")
        for message in messages[cut:]:
            resumed.feed(message)
        assert checkpoints.differences(whole.view, resumed.view, "view") == [], cut
        assert resumed.orphaned == whole.orphaned
        assert resumed.dumps() == expected, cut
    assert whole.view.records and whole.view.reserved_seq  # the demo admits: the sections are not empty


async def test_a_verified_snapshot_then_a_purge_below_it_and_replay_from_it(bus: nats_bus.NatsBus) -> None:
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    done = await snapshots.snapshot_once(bus, SETTLED, force=True, clock=lambda: NOW)
    assert done.written == cut, done.note
    assert done.report is not None and done.report.matched > 0 and not done.report.mismatches
    name = snapshots.object_name(cut)
    assert [n for _, n in await snapshots.positions(bus)] == [name]
    loaded = await snapshots.load(bus, name)
    verified = loaded.header.verified
    assert verified is not None and verified.from_seq == 0 and verified.through_seq == cut
    assert checkpoints.state_digest(loaded.state) == checkpoints.state_digest(_fold(messages[:cut]))

    await _publish_on(bus, messages[cut:])
    # nothing purged without a limit; a size limit purges below the snapshot, keeping #cut
    assert (await snapshots.retain(bus, snapshots.Settings())).purged == 0
    kept = await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    assert kept.purged == cut - 1 and kept.first_seq == cut == await bus.first_seq()

    report = await snapshots.replay_from_snapshot(bus)
    whole = check_log(messages, deciders.BY_ROLE)
    after = sum(1 for m in messages if _record_basis(m) is not None and _record_basis(m) >= cut)  # type: ignore[operator]
    assert report.exit_code == EXIT_OK, report
    assert report.matched == after > 0 and report.decisions == after
    assert report.covered == 0 and report.matched + verified.matched == whole.matched  # every decision, once
    assert report.start_note.startswith(f"log starts at #{cut}, covered by snapshot {name}")

    # a second round verifies from the first snapshot (the chain) and writes the next one
    again = await snapshots.snapshot_once(bus, SETTLED, force=True, clock=lambda: NOW)
    assert again.written == len(messages) and again.verified_from == cut
    newest = await snapshots.load(bus, snapshots.object_name(len(messages)))
    assert newest.header.verified is not None and newest.header.verified.previous_sha256 == loaded.header.body_sha256


async def _snapshot_at_split_with_kq_pub(bus: nats_bus.NatsBus) -> int:
    """The golden log with a snapshot at its split point and an empty KQ_PUB; returns the split point."""
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True, clock=lambda: NOW)).written == cut
    await _publish_on(bus, messages[cut:])
    await bus.ensure_public_stream()
    return cut


async def test_a_purge_never_passes_where_the_publisher_reads_again(bus: nats_bus.NatsBus) -> None:
    """The compactor reads KQ_PUB's last message (``Kq-Seq``, publisher/core.py resume_point): a log is
    purged below a snapshot only when the publisher has published up to it, so a publisher stopped (or
    behind) never restarts past a gap its subscribers miss. Before, only the dispatcher's ack floor
    bounded the purge and the publisher logged ``public_gap``. An empty KQ_PUB bounds nothing: no
    publisher has published, and a deployment without one keeps its retention."""
    cut = await _snapshot_at_split_with_kq_pub(bus)

    async def published_through(seq: int) -> None:
        headers = {publisher_core.KQ_SEQ: str(seq)}
        await bus.publish_public(OutgoingMessage(subject="kq.pub.x", data=b"{}", msg_id=f"pub:{seq}", headers=headers))

    await published_through(cut - 2)  # the publisher would read again from cut - 1: below the snapshot
    behind = await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    assert (behind.purged, await bus.first_seq()) == (0, 1)
    await published_through(cut - 1)  # from cut on: the snapshot's own message stays, so the purge may go
    caught_up = await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    assert caught_up.purged == cut - 1 and await bus.first_seq() == cut


async def test_an_empty_kq_pub_bounds_no_purge(bus: nats_bus.NatsBus) -> None:
    """A deployment whose publisher never published (or runs none) keeps its retention: the aa82480a
    version of the bound read an empty KQ_PUB as "the publisher reads from #1" and never purged again
    (tests/e2e/test_retention.py)."""
    cut = await _snapshot_at_split_with_kq_pub(bus)
    assert await bus.last_public() is None
    purged = await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    assert purged.purged == cut - 1 and await bus.first_seq() == cut


async def test_services_start_from_the_snapshot_of_a_purged_log_and_refuse_without_one(bus: nats_bus.NatsBus) -> None:
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])
    await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))

    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER)
    with pytest.raises(LogPurgedError, match=f"starts at #{cut}"):
        await loop._resume()

    loaded = await snapshots.newest(bus, warn=pytest.fail)
    assert loaded is not None
    start = loaded.start_point(deciders.ADMITTER.role)
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, start=start)
    await loop._resume()
    assert loop.position == cut and loop.state is start.state

    # a decider whose last head was purged expects what the server compares with: no head (0)
    heads = loop.partition_stats("p0")
    heads.head_seq = cut - 1
    assert await loop._purged_head() and heads.head_seq == 0
    heads.head_seq = cut
    assert not await loop._purged_head() and heads.head_seq == cut

    # the dispatcher's view: from the snapshot, folded on to the end, as folded from #1
    dispatch_start = loaded.start_point(snapshots.DISPATCHER)
    view, orphaned = dispatch_start.view
    resumed = snapshots.DispatchFold(view, orphaned)
    for message in messages[cut:]:
        resumed.feed(message)
    whole = snapshots.DispatchFold()
    for message in messages:
        whole.feed(message)
    assert resumed.dumps() == whole.dumps()


async def test_a_snapshot_of_another_log_is_refused(bus: nats_bus.NatsBus) -> None:
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    data = await bus.get_snapshot(snapshots.object_name(cut))
    await _fresh_log(bus)
    other = [LogMessage(seq=m.seq, subject=m.subject, data=m.data, headers=m.headers) for m in messages[1:cut]]
    other.append(messages[cut - 1])  # one more message: same length, another log
    await _publish_raw(bus, other)
    await bus.put_snapshot(snapshots.object_name(cut), data)
    refusals: list[str] = []
    assert await snapshots.newest(bus, warn=refusals.append) is None
    assert "not of this log" in refusals[0]
    start = StartPoint(state=_fold([]), seq=cut, head_seqs={}, first_sha256="x", at_sha256="y")
    assert start.seq == cut


async def test_only_the_compactor_and_admin_may_purge_and_every_service_reads_snapshots(
    secured: server.NatsServer,  # noqa: F811
    auth: server.LocalAuth,  # noqa: F811
) -> None:
    await nats_bus.ensure_log_stream(secured.url, credentials=auth.credentials(permissions.ADMIN))
    compactor = await bus_as(secured, auth, permissions.COMPACTOR)
    admitter = await bus_as(secured, auth, "admitter")
    dispatcher = await bus_as(secured, auth, "dispatcher")
    try:
        await compactor.put_snapshot("000000000001-test.snap", b"snapshot bytes")
        for service in (admitter, dispatcher):
            assert await service.snapshot_names() == ["000000000001-test.snap"]
            assert await service.get_snapshot("000000000001-test.snap") == b"snapshot bytes"
        assert await refused(admitter.purge_below(1))
        assert await refused(dispatcher.put_snapshot("x", b"forged"))
        assert await compactor.purge_below(1) == 0
        assert await compactor.durable_done_through("dispatcher") is None
        await compactor.delete_snapshot("000000000001-test.snap")
        assert await admitter.snapshot_names() == []
    finally:
        for opened in (compactor, admitter, dispatcher):
            await opened.close()


# --- helpers --------------------------------------------------------------------------------------


async def _publish_on(bus: nats_bus.NatsBus, messages: list[LogMessage]) -> None:
    await _publish_raw(bus, messages)


async def _publish_raw(bus: nats_bus.NatsBus, messages: list[LogMessage]) -> None:
    js = bus.nc.jetstream()
    for message in messages:
        await js.publish(message.subject, message.data, headers=dict(message.headers))


async def _fresh_log(bus: nats_bus.NatsBus) -> None:
    await bus.nc.jsm().delete_stream(base.STREAM_NAME)
    await bus.ensure_stream(nats_bus._log_config(1))


def _fold(messages: list[LogMessage]) -> object:
    from kueue_es.projections.cluster import ClusterState
    from kueue_es.services.runtime import fold_message

    state = ClusterState()
    for message in messages:
        fold_message(state, message)
    return state


def _record_basis(message: LogMessage) -> int | None:
    event = codec.decode(message.data)
    return event.basis_seq if isinstance(event, types.DecisionRecord) else None


async def test_the_watcher_learns_from_a_snapshot_what_it_learns_from_the_start(bus: nats_bus.NatsBus) -> None:
    from kueue_es.services.watcher.service import Watcher

    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])
    whole = Watcher(bus=bus, api=_NoApi())
    await whole.learn_from_log()
    loaded = await snapshots.newest(bus, warn=pytest.fail)
    assert loaded is not None
    resumed = Watcher(bus=bus, api=_NoApi())
    await resumed.learn_from_log(loaded.start_point(snapshots.WATCHER))
    for name in ("known", "workloads", "sources", "last_published"):
        assert getattr(resumed.publisher, name) == getattr(whole.publisher, name), name
    for name in ("stopped", "pods_ready", "check_states"):
        assert getattr(resumed.reporter, name) == getattr(whole.reporter, name), name
    assert (resumed.config.count, resumed.config.on_log) == (whole.config.count, whole.config.on_log)
    assert whole.publisher.known["ClusterQueue"] and whole.publisher.workloads
    # the last fact about each object, so a restarted watcher publishes only what changed (a new user's trial)
    assert {("ClusterQueue", "", name) for _, name in whole.publisher.known["ClusterQueue"]} <= set(
        whole.publisher.last_published
    )
    assert {("Workload", *key) for key in whole.publisher.workloads} <= set(whole.publisher.last_published)

    await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    with pytest.raises(
        LogPurgedError, match=f"the watcher cannot fold the log from the start: stream KQ_LOG starts at #{cut}"
    ):
        await Watcher(bus=bus, api=_NoApi()).learn_from_log()


class _NoApi:
    """A KubeReader the start-up fold never calls."""

    def list(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("not listed at start-up")

    def watch(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("not watched at start-up")


async def test_the_dispatcher_folds_from_a_snapshot_as_from_the_start(bus: nats_bus.NatsBus) -> None:
    """The running Dispatcher's own fold (fold_forever), from #1 and from the snapshot of a purged
    log, is the view the compactor's DispatchFold makes."""
    from kueue_es.services.dispatcher.service import Dispatcher

    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])
    expected = snapshots.DispatchFold()
    for message in messages:
        expected.feed(message)

    async def folded(dispatcher: Dispatcher) -> Dispatcher:
        task = asyncio.create_task(dispatcher.fold_forever())
        try:
            async with asyncio.timeout(10):
                while dispatcher.state.last_seq < len(messages):
                    await asyncio.sleep(0.02)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return dispatcher

    from_start = await folded(Dispatcher(bus=bus, api=_NoApi()))  # type: ignore[arg-type]
    await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    loaded = await snapshots.newest(bus, warn=pytest.fail)
    assert loaded is not None
    start = loaded.start_point(snapshots.DISPATCHER)
    resumed = await folded(Dispatcher(bus=bus, api=_NoApi(), start=start))  # type: ignore[arg-type]
    for dispatcher in (from_start, resumed):
        view = snapshots.DispatchFold(dispatcher.view, frozenset(dispatcher.orphaned_seqs))
        assert checkpoints.differences(expected.view, dispatcher.view, "view") == []
        assert view.dumps() == expected.dumps()
    with pytest.raises(
        LogPurgedError, match=f"the dispatcher cannot fold the log from the start: stream KQ_LOG starts at #{cut}"
    ):
        await Dispatcher(bus=bus, api=_NoApi())._resume()  # type: ignore[arg-type]


async def test_an_age_limit_purges_only_below_a_snapshot_older_than_it(bus: nats_bus.NatsBus) -> None:
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])
    stored_ms = await bus.message_time_ms(cut)
    # not due: the log grew less than --every since the snapshot and the snapshot is recent
    later = snapshots.Settings(every=10_000, interval=3600, settle=0.0)
    assert (await snapshots.snapshot_once(bus, later, clock=lambda: stored_ms / 1000 + 60)).written is None
    # the snapshot's message is younger than the age limit: nothing purged
    young = await snapshots.retain(bus, snapshots.Settings(retain_age=3600), clock=lambda: stored_ms / 1000 + 60)
    assert young.purged == 0 and await bus.first_seq() == 1
    # older than it: purged below the snapshot, and no further
    old = await snapshots.retain(bus, snapshots.Settings(retain_age=3600), clock=lambda: stored_ms / 1000 + 7200)
    assert old.purged == cut - 1 and await bus.first_seq() == cut
    # the interval passed: the next round verifies from the snapshot and writes one at the end
    due = await snapshots.snapshot_once(bus, later, clock=lambda: stored_ms / 1000 + 7200)
    assert due.written == len(messages) and due.verified_from == cut


def test_a_dispatcher_section_written_before_its_last_fields_still_loads() -> None:
    """The section's last fields came later (issue 18, the releases written first; then the Workloads deleted
    by hand whose old object is still to be let go of; then which of those no longer matched their job; then the
    prebuilt Workloads adopted once admitted; then the count of each Workload object's changes, which keys its
    Events): an older section, shorter, loads with none."""
    fold = snapshots.DispatchFold()
    for message in golden():
        fold.feed(message)
    fold.view.deleted_workloads = {"default/deleted-by-hand": None, "default/not-matching": None}
    fold.view.not_matching = {"default/not-matching": None}
    fold.view.adopted_admitted = {"default/prebuilt": 7}
    assert fold.view.object_versions  # the golden log's workloads changed
    section = msgspec.msgpack.decode(fold.dumps())
    now = snapshots.DispatchFold.loads(fold.dumps(), where="now").view
    assert now.deleted_workloads == fold.view.deleted_workloads and now.not_matching == fold.view.not_matching
    assert now.adopted_admitted == {"default/prebuilt": 7}
    assert now.object_versions == fold.view.object_versions
    before_versions = snapshots.DispatchFold.loads(msgspec.msgpack.encode(section[:-1]), where="older")
    assert before_versions.view.object_versions == {}
    assert before_versions.view.adopted_admitted == {"default/prebuilt": 7}
    before_adoptions = snapshots.DispatchFold.loads(msgspec.msgpack.encode(section[:-2]), where="older")
    assert before_adoptions.view.adopted_admitted == {}
    assert before_adoptions.view.not_matching == fold.view.not_matching
    before_not_matching = snapshots.DispatchFold.loads(msgspec.msgpack.encode(section[:-3]), where="older")
    assert before_not_matching.view.not_matching == {}
    assert before_not_matching.view.deleted_workloads == fold.view.deleted_workloads
    before_deletions = snapshots.DispatchFold.loads(msgspec.msgpack.encode(section[:-4]), where="older")
    assert before_deletions.view.deleted_workloads == {}
    assert before_deletions.view.unwritten_releases == fold.view.unwritten_releases
    older = msgspec.msgpack.encode(section[:-5])
    loaded = snapshots.DispatchFold.loads(older, where="older")
    assert loaded.view.unwritten_releases == {}
    assert loaded.view.records == fold.view.records


async def _purged_at_split(bus: nats_bus.NatsBus, messages: list[LogMessage]) -> int:
    """The log written whole with a verified snapshot at its split point, then purged below it."""
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])
    assert (await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))).first_seq == cut
    return cut


async def test_the_dashboard_starts_from_the_snapshot_of_a_purged_log(bus: nats_bus.NatsBus) -> None:
    """Found by a new user's trial: after `kueue-es compact` the dashboard refused the log (it read only
    from #1), crash-looped, and `demo --keep` on the same --dir stopped everything."""
    from kueue_es import logsource
    from kueue_es.dashboard.server import History, LiveLog

    messages = golden()
    cut = await _purged_at_split(bus, messages)
    live = LiveLog()
    following = asyncio.create_task(live.follow(bus))
    try:
        async with asyncio.timeout(20):
            while live.last_seq < len(messages):
                await asyncio.sleep(0.05)
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
    assert live.base_seq == cut and live.origin.endswith(snapshots.object_name(cut))
    assert live.seqs[0] == cut + 1 and live.caught_up
    whole = logsource.Folder()
    for message in messages:
        whole.feed(message)
    assert checkpoints.state_digest(live.folder.state) == checkpoints.state_digest(whole.state)
    history = History(live)
    state, _ = history.state_at(0)  # the history starts at the snapshot
    assert checkpoints.state_digest(state) == checkpoints.state_digest(_fold(messages[:cut]))  # type: ignore[arg-type]
    assert history.overview_at(0)["asOf"]["seq"] == cut
    state, _ = history.state_at(len(live.messages))
    assert checkpoints.state_digest(state) == checkpoints.state_digest(whole.state)


async def test_the_dashboard_refuses_a_purged_log_without_a_snapshot(bus: nats_bus.NatsBus) -> None:
    from kueue_es.dashboard.server import LiveLog

    messages = golden()
    cut = await _purged_at_split(bus, messages)
    for name in [n for _, n in await snapshots.positions(bus)]:
        await bus.delete_snapshot(name)
    with pytest.raises(
        LogPurgedError, match=f"the dashboard cannot fold the log from the start: stream KQ_LOG starts at #{cut}"
    ):
        await LiveLog().follow(bus)


async def test_the_demos_closing_replay_of_a_purged_log_starts_from_its_snapshot(bus: nats_bus.NatsBus) -> None:
    """Found by a new user's trial: the one-shot demo on a compacted --dir replayed from #1 and reported
    the purged messages as a gap (and decisions as differing) where `kueue-es replay --store` matched."""
    from kueue_es import demo

    messages = golden()
    cut = await _purged_at_split(bus, messages)
    report = await demo.closing_replay(bus)
    assert report.exit_code == EXIT_OK, report
    assert report.start_note.startswith(f"log starts at #{cut}, covered by snapshot")
    assert report.matched > 0 and not report.mismatches


async def test_the_publisher_starts_on_a_log_purged_past_what_kq_pub_published(
    bus: nats_bus.NatsBus, plain_server: server.NatsServer
) -> None:
    """Found by a new user's trial: `kueue-es compact` purged the log past KQ_PUB's last message (the
    compactor did not know the publisher then; a log may still be purged so by hand, or on a deployment
    created without KQ_PUB), and the publisher refused to start for ever, which stopped `demo --keep` on the
    compacted --dir. It now starts from the oldest snapshot and says what KQ_PUB misses."""
    from kueue_es.services.publisher.service import Publisher

    with contextlib.suppress(nats.js.errors.NotFoundError):
        await bus.nc.jsm().delete_stream(nats_bus.PUBLIC_STREAM_NAME)
    messages = golden()
    cut = await _purged_at_split(bus, messages)  # no KQ_PUB yet: nothing bounds the purge
    await bus.ensure_public_stream()
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == len(messages)

    start = await snapshots.service_start(plain_server.url, snapshots.PUBLISHER, warn=pytest.fail)
    assert start is not None and start.seq == cut  # KQ_PUB is empty: the oldest, not the newest
    publisher = Publisher(bus=bus, start=start)
    await publisher._resume()
    assert publisher.position == cut and publisher.state is start.state and publisher.published_through == cut

    # KQ_PUB holds everything through the snapshot's position, its last message a record's output there (so
    # it asks for the log from that record): the snapshot, where no batch is half read, is exact; no gap
    from kueue_es.services.publisher import core as publisher_core

    public = base.OutgoingMessage(
        subject="kq.pub.wl.default.x",
        data=b"{}",
        msg_id="through-cut",
        headers={publisher_core.KQ_SEQ: str(cut), publisher_core.KQ_RECORD_SEQ: str(cut)},
    )
    await bus.publish_public(public)
    exact = Publisher(bus=bus, start=start)
    await exact._resume()
    assert publisher_core.resume_point(await bus.last_public()) == (cut, cut)
    assert exact.position == cut and exact.published_through == cut


async def test_the_multikueue_edge_starts_from_the_snapshot_of_a_purged_log(bus: nats_bus.NatsBus) -> None:
    """Found by a new user's trial: after `kueue-es compact` the MultiKueue edge read the purged log from what
    was left with an empty state, so every later decision was orphaned (``wrong_partition ... x-unrouted``)
    and no admission reached a worker. It starts from the snapshot as the other services do, and refuses a
    purged log without one."""
    from kueue_es.services.multikueue_edge.service import Edge

    messages = golden()
    cut = await _purged_at_split(bus, messages)
    with pytest.raises(
        LogPurgedError, match=f"the multikueue edge cannot fold the log from the start: stream KQ_LOG starts at #{cut}"
    ):
        await Edge(bus=bus, api=None, namespace="kueue-system")._follow_log()  # type: ignore[arg-type]

    loaded = await snapshots.newest(bus, warn=pytest.fail)
    assert loaded is not None
    edge = Edge(bus=bus, api=None, namespace="kueue-system", start=loaded.start_point("multikueue-edge"))  # type: ignore[arg-type]
    following = asyncio.create_task(edge._follow_log())
    try:
        async with asyncio.timeout(20):
            while not (edge.caught_up and edge.state.last_seq >= len(messages)):
                await asyncio.sleep(0.05)
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
    whole = _fold(messages)
    assert edge.state.cluster_queues.keys() == whole.cluster_queues.keys() != set()  # type: ignore[attr-defined]
    assert checkpoints.state_digest(edge.state) == checkpoints.state_digest(whole)  # type: ignore[arg-type]


async def test_the_demos_timeline_of_a_purged_log_folds_on_from_its_snapshot(bus: nats_bus.NatsBus) -> None:
    """Found by a new user's trial: `demo --keep --jobs 0 --dir D` on a compacted D printed every decision after
    the purge as ``refused ... is in partition x-unrouted`` and nothing admitted (its fold started empty at the
    first message left), where `kueue-es replay --store` matched them all."""
    import io

    from rich.console import Console

    from kueue_es.demo import TimelinePrinter

    messages = golden()
    cut = await _purged_at_split(bus, messages)
    out = io.StringIO()
    printer = TimelinePrinter(bus=bus, console=Console(file=out, width=250, color_system=None))
    following = asyncio.create_task(printer.follow())
    try:
        assert await printer.wait_until(lambda: printer.state.last_seq >= len(messages), timeout=20)
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(f"folds on from snapshot {snapshots.object_name(cut)} (#{cut})"), lines[0]
    assert not any("refused" in line for line in lines), lines
    assert any(" admitted " in line for line in lines), lines
    assert all(int(line.split("#")[1].split()[0]) > cut for line in lines[1:]), lines
    assert checkpoints.state_digest(printer.state) == checkpoints.state_digest(_fold(messages))  # type: ignore[arg-type]
