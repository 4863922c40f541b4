"""The watcher's side of the log: publish a fact once, and know what the log holds.

Why this module exists: every family of kinds the watcher follows ends in the same
step -- put a fact on the log with a ``Nats-Msg-Id`` made of kind, object,
resourceVersion and a digest of the fact, unless it changes nothing -- and that step needs one memory
shared by all of them: which objects the log holds (so a relist can find the ones
deleted meanwhile), the last fact published for each (so a status write or a
resync publishes nothing), and the last workload published for each job (what a
conversion keeps, such as ``spec.active``). :class:`Publisher` is that memory and
that step; the collaborators in ``*_tracking.py`` and ``reporting.py`` call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Iterable
from typing import cast

import msgspec
import structlog

from kueue_es.events import codec, job_owners, models, slices, subjects, types
from kueue_es.events.bus.base import Bus, BusError, DuplicateBatchError, OutgoingMessage
from kueue_es.jobframework import prebuilt, workloads
from kueue_es.projections.cluster import ClusterState
from kueue_es.projections.topology import TopologyState
from kueue_es.services.watcher.kinds import Key

log = structlog.get_logger(__name__)

FACT_SOURCE = "watcher"
"""The ``kq.in.batch.<source>`` token of the watcher's FactBatch messages."""

RETRY_SECONDS = 1.0
"""Seconds between two tries of publishing queued facts the bus refused (:meth:`Publisher.emit`)."""


OwnPriority = tuple[tuple[str, str] | None, int]
"""A ``spec.priority`` a user set on a job's Workload object: its ``priorityClassRef`` then as ``(kind, name)``
(None for none), and the value."""


def readable(fact: types.Fact, data: bytes | None = None) -> types.Fact:
    """``fact``, or, when it carries an integer beyond 64 bits (which no service can read back:
    :func:`kueue_es.events.codec.decode` refuses it), the ObjectRejected of the object it is about naming where:
    the watcher never publishes an event that does not decode. A workload's is its job's (the field its
    Workload's, as a converter's rejection names it); ``data``: the fact encoded, when the caller has it. The
    converters refuse such numbers themselves where they read them (a pod group's total count, a count, a
    slice size); this is the boundary for anything they let through."""
    found = codec.out_of_range(codec.encode(fact) if data is None else data)
    if found is None:
        return fact
    path, value = found
    kind, namespace, name = subjects.fact_identity(fact)
    steps = path.removeprefix("$.")
    if isinstance(fact, types.WorkloadObserved):
        job = job_owners.job_of(fact.workload)
        if job is not None:
            kind, name = job.kind, job.name
        steps = steps.removeprefix("workload.")
    rejection = types.ObjectRejected(
        kind=kind,
        namespace=namespace,
        name=name,
        field=steps,
        problem=f"{value} is out of the 64-bit integer range: no event can carry it",
        at_ms=getattr(fact, "at_ms", 0) or 0,
    )
    log.warning("unreadable_fact", fact=codec.type_name(fact), kind=kind, name=f"{namespace}/{name}", field=steps)
    return rejection


def content_key(data: bytes) -> bytes:
    """What :class:`Publisher` keeps of a fact's encoding to know it again (:attr:`Publisher.last_published`):
    a 16-byte digest, so the memory of every object, kept by the watcher and in snapshots, stays small."""
    return hashlib.blake2b(data, digest_size=16).digest()


REMEMBERED = (
    types.ResourceFlavorObserved,
    types.ClusterQueueObserved,
    types.CohortObserved,
    types.LocalQueueObserved,
    types.WorkloadPriorityClassObserved,
    types.WorkloadObserved,
    types.WorkloadFinished,
    types.AdmissionCheckObserved,
    types.NamespaceObserved,
    types.MultiKueueClusterObserved,
    types.MultiKueueConfigObserved,
    types.TopologyObserved,
    types.NodeObserved,
    types.PodObserved,
    types.DeviceClassObserved,
    types.ResourceClaimTemplateObserved,
    types.ResourceSliceObserved,
    types.ObjectRejected,
)
"""The facts :meth:`Publisher.publish` publishes only when they differ from the last one about their object
(the watcher's full-state facts, a job's WorkloadFinished, a rejection), so a fact of these already on the
log is not published again by a watcher that restarted."""


def remembered(fact: types.Fact) -> tuple[tuple[str, str, str], bytes | None] | None:
    """What :meth:`Publisher.publish` remembers of ``fact`` when it is on the log: ``(identity, key)`` with
    the key it compares by (:func:`compared`), ``(identity, None)`` for an
    ObjectDeleted (the object is forgotten), None for any other fact (one published by its own rule: a
    WorkloadStopped, a PodsReady, the Configuration, ...). Pure: the watcher's start-up fold and a
    snapshot's watcher section (kueue_es.snapshots) both use it."""
    if isinstance(fact, types.ObjectDeleted):
        return subjects.fact_identity(fact), None
    if not isinstance(fact, REMEMBERED):
        return None
    return subjects.fact_identity(fact), compared(fact)


def compared(fact: types.Fact, data: bytes | None = None) -> bytes:
    """The :func:`content_key` :meth:`Publisher.publish` compares ``fact`` by (``data``: its encoding, when
    made already): its whole content, but the time of a rejection or a finish, which are the same rejection
    and the same finish whenever seen (a status write, a conversion redone, a Job whose Complete condition
    carries no time, a restart)."""
    if isinstance(fact, types.ObjectRejected | types.WorkloadFinished):
        return content_key(codec.encode(msgspec.structs.replace(fact, at_ms=0)))
    return content_key(codec.encode(fact) if data is None else data)


def facts_of(data: bytes) -> list[types.Fact]:
    """The facts a log message about facts carries (a FactBatch's, or its one fact); [] when it cannot be
    decoded (a bad message is skipped, never fatal)."""
    try:
        event = codec.decode(data)
    except codec.DecodeError:
        return []
    if isinstance(event, types.FactBatch):
        return list(event.facts)
    return [cast(types.Fact, event)]  # any other event: :func:`remembered` keeps nothing of it


def remember(memory: dict[tuple[str, str, str], bytes], data: bytes) -> None:
    """Fold the facts of one log message (``data``) into ``memory``, identity -> :func:`content_key` of
    the last fact :func:`remembered` about it: what :attr:`Publisher.last_published` holds after a watcher
    published them."""
    for fact in facts_of(data):
        found = remembered(fact)
        if found is None:
            continue
        identity, key = found
        if key is None:
            memory.pop(identity, None)
        else:
            memory[identity] = key


def _facts_in(message: OutgoingMessage) -> int:
    """How many facts a message :func:`~kueue_es.events.subjects.fact_batches` made carries."""
    if message.subject.startswith(subjects.FACT_BATCH_PREFIX):
        batch = codec.decode(message.data)
        return len(batch.facts) if isinstance(batch, types.FactBatch) else 1
    return 1


class Publisher:
    """Publishes facts on ``bus``; knows which objects the log holds and what was last published for each."""

    def __init__(self, *, bus: Bus, kinds: Iterable[str], batch_facts: bool = False) -> None:
        self.bus = bus
        # workloads' WorkloadObserved and WorkloadFinished facts gathered and published as FactBatch messages
        # (schema 16): see :meth:`emit`. Off, each fact is published and acked before emit returns.
        self.batch_facts = batch_facts
        self._pending: list[tuple[types.BatchedFact, str]] = []
        self._flushing: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        self.unpublished = 0  # facts whose batch could not be published yet (retried every RETRY_SECONDS)
        self.known: dict[str, set[Key]] = {kind: set() for kind in kinds}
        # identity -> content_key of the last fact published about it (learned from the log at start-up too)
        self.last_published: dict[tuple[str, str, str], bytes] = {}
        self.workloads: dict[Key, models.Workload] = {}  # the last workload published for each job
        self.sources: dict[Key, str] = {}  # workload -> the job kind it came from
        # jobs' workloads whose Workload object outlived its job (kubectl delete job --cascade=orphan): workload
        # -> its UID on the log. Finished OwnerNotFound, not deleted with the job; deleted with the object.
        self.orphaned: dict[Key, str] = {}
        # MultiKueue's AdmissionChecks: kueue-es is their controller, their Workload entries are its own
        self.own_checks: set[str] = set()
        # the kueue.x-k8s.io/priority-boost annotation (None: none) each job's Workload object was last seen with:
        # another controller sets it on the object, so every workload published for that job carries it
        self.boosts: dict[Key, str | None] = {}
        # the spec.priority a user set on a job's Workload object (:func:`own_priority_of`), by workload: its
        # priorityClassRef then (kind, name; None for none) and the value. Every workload published for that job
        # with that class carries it, marked its own (models.OWN_PRIORITY_ANNOTATION); one of another class
        # (the job's priority-class label changed) does not: Kueue's job reconciler then writes the class's value
        self.own_priorities: dict[Key, OwnPriority] = {}
        # a user's value Kueue has written over since (the class given another value, the job rewritten): the
        # object shows it until the dispatcher's write of the new one, and it is not read back meanwhile
        self.superseded: dict[Key, OwnPriority] = {}
        self.class_values: dict[str, int] = {}  # WorkloadPriorityClass name -> its value last published
        self.published = 0

    # -- what the log holds -------------------------------------------------------------------

    def learn(
        self, *, state: ClusterState, topology: TopologyState, memory: dict[tuple[str, str, str], bytes] | None = None
    ) -> None:
        """Know the Kueue objects, the jobs' workloads, the TAS and DRA objects of the folded log, and
        (``memory``, :func:`remember`) the last fact it holds about each object: what a watcher that had
        published them would compare a new fact with, so a restarted one publishes only what changed."""
        self.last_published.update(memory or {})
        self.known["ResourceFlavor"] = {("", n) for n in state.flavors}
        self.known["Cohort"] = {("", n) for n in state.cohorts}
        self.known["ClusterQueue"] = {("", n) for n in state.cluster_queues}
        self.known["LocalQueue"] = set(state.local_queues)
        self.known["WorkloadPriorityClass"] = {("", n) for n in state.priority_classes}
        self.class_values = {name: wpc.value for name, wpc in state.priority_classes.items()}
        self.known["AdmissionCheck"] = {("", n) for n in state.admission_checks}
        self.known["Namespace"] = {("", n) for n in state.namespaces}
        self.known["MultiKueueCluster"] = {("", n) for n in state.multikueue.clusters}
        self.known["MultiKueueConfig"] = {("", n) for n in state.multikueue.configs}
        self.own_checks = set(state.multikueue.checks)
        for (kind, namespace, name), rejected in state.rejections.items():
            # still refused: the same rejection is not published again, its object's deletion is
            self.last_published[(kind, namespace, name)] = compared(rejected)
        self._learn_tas(topology)
        dra_facts: list[types.Fact] = [types.DeviceClassObserved(device_class=d) for d in state.device_classes.values()]
        dra_facts += [
            types.ResourceClaimTemplateObserved(resource_claim_template=t) for t in state.claim_templates.values()
        ]
        dra_facts += [types.ResourceSliceObserved(resource_slice=s) for s in state.resource_slices.values()]
        for fact in dra_facts:
            kind, namespace, name = subjects.fact_identity(fact)
            self.known[kind].add((namespace, name))
            self.last_published[(kind, namespace, name)] = content_key(codec.encode(fact))
        for wl in state.workloads.values():
            if not wl.deleted_seq:  # a job's workload, or a standalone one (source "")
                key = (wl.workload.metadata.namespace, wl.workload.metadata.name)
                self.known["Workload"].add(key)
                self.workloads[key] = wl.workload
                self.sources[key] = wl.workload.owner.kind if wl.workload.owner else ""
                spec = wl.workload.spec
                marked = models.OWN_PRIORITY_ANNOTATION in wl.workload.metadata.annotations
                adopted = prebuilt.is_adopted(wl.workload)
                if wl.workload.owner is not None and marked and spec.priority is not None and not adopted:
                    self.own_priorities[key] = (class_of(spec.priority_class_ref), spec.priority)
                finished = wl.finished
                if (
                    finished is not None
                    and finished.reason == workloads.OWNER_NOT_FOUND_REASON
                    and finished.owner_deleting is not True  # a deleting job's: it goes with its job
                ):
                    self.orphaned[key] = wl.workload.metadata.uid

    def _learn_tas(self, topology: TopologyState) -> None:
        """Know the Topologies, Nodes and pods the log holds, and their content, so an unchanged one is not
        published again after a restart and one deleted meanwhile gets its ObjectDeleted."""
        facts: list[types.Fact] = [types.TopologyObserved(topology=t) for t in topology.topologies.values()]
        facts += [types.NodeObserved(node=n) for n in topology.nodes.values()]
        facts += [types.PodObserved(pod=p) for p in topology.pods.values()]
        for fact in facts:
            kind, namespace, name = subjects.fact_identity(fact)
            self.known[kind].add((namespace, name))
            self.last_published[(kind, namespace, name)] = content_key(codec.encode(fact))

    # -- publishing ---------------------------------------------------------------------------

    async def publish(self, fact: types.Fact, *, version: str, source: str = "") -> None:
        """Publish ``fact`` unless it changes nothing; ``source`` names the job kind of a workload's fact.

        Facts are keyed by resourceVersion and content (the Msg-Id): the same object version converted again
        after a change to what conversions read, or a new object whose resourceVersion an earlier one had (an
        API server whose versions started over), must not be dropped as a duplicate.
        """
        fact = self.own_priority(self.boosted(fact))
        if isinstance(fact, types.WorkloadPriorityClassObserved):
            self._class_value(fact.priority_class)
        data = codec.encode(fact)
        if (checked := readable(fact, data)) is not fact:
            fact, data = checked, codec.encode(checked)
        kind, namespace, name = subjects.fact_identity(fact)
        identity = (kind, namespace, name)
        # A rejection or a finish seen again (a status write, a conversion redone) is the same, whenever seen.
        same_as = compared(fact, data)
        if isinstance(fact, types.ObjectDeleted):
            if (namespace, name) not in self.known.get(kind, set()):
                if self.last_published.pop(identity, None) is None:
                    return
                # known only by its rejection (the last fact published about it, :meth:`rejected_gone`): the fold
                # forgets that rejection, nothing else
                fact = msgspec.structs.replace(fact, reason=types.REJECTED_OBJECT_GONE)
                await self._emit(fact, version=version)
                return
            self.known[kind].discard((namespace, name))
            self.last_published.pop(identity, None)
            if kind == "Workload":
                self.workloads.pop((namespace, name), None)
                self.sources.pop((namespace, name), None)
                self.boosts.pop((namespace, name), None)
                self.own_priorities.pop((namespace, name), None)
                self.superseded.pop((namespace, name), None)
                self.orphaned.pop((namespace, name), None)
        elif self.last_published.get(identity) == same_as:
            return  # nothing that matters changed (a status write, a resync)
        else:
            self.last_published[identity] = same_as
            if not isinstance(fact, types.ObjectRejected):
                self.known.setdefault(kind, set()).add((namespace, name))
            if isinstance(fact, types.WorkloadObserved):
                self.workloads[(namespace, name)] = fact.workload
            if kind == "Workload" and not isinstance(fact, types.ObjectRejected):
                owner = fact.workload.owner if isinstance(fact, types.WorkloadObserved) else None
                self.sources[(namespace, name)] = source or (owner.kind if owner else "")
            if version:
                # the content too: an object version converted again after a change to what conversions read is
                # another fact, and so is an object made again under the same name by an API server whose
                # resourceVersions started over (an emulator restarted, a cluster restored from a backup), which
                # the stream's duplicate window would otherwise drop as the old object's fact of that version
                version = f"{version}.{hashlib.sha256(data).hexdigest()[:8]}"
        await self._emit(fact, version=version)

    def boosted(self, fact: types.Fact) -> types.Fact:
        """``fact`` with a job's workload carrying the priority boost its Workload object was last seen with
        (:attr:`boosts`; Kueue's scheduler reads the object's annotation, gate PriorityBoost): the job knows
        nothing of it. A workload whose object was not seen yet, or one made by hand (its own annotations are
        the object's), is left as it is."""
        if not isinstance(fact, types.WorkloadObserved) or fact.workload.owner is None:
            return fact
        meta = fact.workload.metadata
        key = (meta.namespace, meta.name)
        if key not in self.boosts:
            return fact
        want = self.boosts[key]
        if meta.annotations.get(models.PRIORITY_BOOST_ANNOTATION) == want:
            return fact
        annotations = {k: v for k, v in meta.annotations.items() if k != models.PRIORITY_BOOST_ANNOTATION}
        if want is not None:
            annotations[models.PRIORITY_BOOST_ANNOTATION] = want
        workload = msgspec.structs.replace(
            fact.workload, metadata=msgspec.structs.replace(meta, annotations=dict(sorted(annotations.items())))
        )
        return msgspec.structs.replace(fact, workload=workload)

    def own_priority(self, fact: types.Fact) -> types.Fact:
        """``fact`` with a job's workload carrying the ``spec.priority`` its user set on its Workload object
        (:attr:`own_priorities`), marked its own (:data:`~kueue_es.events.models.OWN_PRIORITY_ANNOTATION`: the fold
        then reads that number), while the workload names the class it named then: the job knows nothing of that
        value, and Kueue's job reconciler rewrites it only when the job's priority class changes
        (jobframework/reconciler.go UpdateWorkloadPriority). Otherwise a mark the workload carries goes (its value
        is no longer a user's: its class changed, or Kueue wrote the class's value over it), and a
        WorkloadPriorityClass's value is its priority again. A workload made by hand, or a prebuilt one its job
        adopted, is left as it is: its object is what the watcher converts."""
        if not isinstance(fact, types.WorkloadObserved) or fact.workload.owner is None:
            return fact
        workload = fact.workload
        if prebuilt.is_adopted(workload):
            return fact  # its object is what the watcher converts, its own priority marked there
        meta, spec = workload.metadata, workload.spec
        key = (meta.namespace, meta.name)
        own = self.own_priorities.get(key)
        marked = models.OWN_PRIORITY_ANNOTATION in meta.annotations
        if own is not None and own[0] == class_of(spec.priority_class_ref) and self._rewritten(key, workload):
            self.superseded[key] = self.own_priorities.pop(key)
            own = None
        if own is not None and own[0] == class_of(spec.priority_class_ref):
            if marked and spec.priority == own[1]:
                return fact
            annotations = {**meta.annotations, models.OWN_PRIORITY_ANNOTATION: "true"}
            meta = msgspec.structs.replace(meta, annotations=dict(sorted(annotations.items())))
            spec = msgspec.structs.replace(spec, priority=own[1])
        elif marked:
            annotations = {k: v for k, v in meta.annotations.items() if k != models.OWN_PRIORITY_ANNOTATION}
            meta = msgspec.structs.replace(meta, annotations=annotations)
            ref = class_of(spec.priority_class_ref)
            if ref is not None and ref[0] == "WorkloadPriorityClass" and ref[1] in self.class_values:
                spec = msgspec.structs.replace(spec, priority=self.class_values[ref[1]])  # the class's, as Kueue wrote
        else:
            return fact
        return msgspec.structs.replace(fact, workload=msgspec.structs.replace(workload, metadata=meta, spec=spec))

    def _rewritten(self, key: Key, workload: models.Workload) -> bool:
        """Whether ``workload``, a job's converted again, asks for another shape than the one last published for it
        (pod sets, ``maximumExecutionTimeSeconds``): Kueue's job reconciler then rewrites the Workload's whole spec
        from the job, its priority the class's again (reconciler.go updateWorkloadToMatchJob). Not for an elastic
        job's slice, whose count is changed in place."""
        known = self.workloads.get(key)
        if known is None or slices.is_elastic(workload.metadata.annotations):
            return False
        spec, before = workload.spec, known.spec
        return (
            spec.pod_sets != before.pod_sets
            or spec.maximum_execution_time_seconds != before.maximum_execution_time_seconds
        )

    def object_priority(self, key: Key, own: OwnPriority | None) -> bool:
        """The priority a user set on the Workload object of job workload ``key`` as last seen (None: none, the
        dispatcher's value): remembered for :meth:`own_priority`. Whether that changes what the log is told. A value
        Kueue wrote over since (:attr:`superseded`) the object may still show until the dispatcher's write: not
        read back."""
        if own is None:
            self.superseded.pop(key, None)
        elif self.superseded.get(key) == own:
            own = None
        if self.own_priorities.get(key) == own:
            return False
        if own is None:
            del self.own_priorities[key]
        else:
            self.own_priorities[key] = own
        return True

    def _class_value(self, priority_class: models.WorkloadPriorityClass) -> None:
        """A WorkloadPriorityClass published: given another value, the priorities users set on the workloads
        naming it are no longer theirs, as Kueue's WorkloadPriorityClass controller writes the new value into each
        of them (the fold does so: projections.cluster); the dispatcher's write of it then owns the field."""
        name = priority_class.metadata.name
        previous = self.class_values.get(name)
        self.class_values[name] = priority_class.value
        if previous is None or previous == priority_class.value:
            return
        for key in [k for k, (ref, _) in self.own_priorities.items() if ref == ("WorkloadPriorityClass", name)]:
            self.superseded[key] = self.own_priorities.pop(key)

    async def rejected_gone(self, kind: str, namespace: str, name: str, *, uid: str, version: str) -> None:
        """An object of ``kind`` was deleted: its ObjectDeleted, with reason
        :data:`~kueue_es.events.types.REJECTED_OBJECT_GONE`, when the last fact published about it was its
        ObjectRejected (the fold then forgets the rejection); nothing otherwise. For the kinds whose own
        deletion is no fact of the log (a job: its workload's is; a pod)."""
        if (kind, namespace, name) in self.last_published and (namespace, name) not in self.known.get(kind, set()):
            await self.publish(types.ObjectDeleted(kind=kind, namespace=namespace, name=name, uid=uid), version=version)

    async def emit(self, fact: types.Fact, *, version: str) -> None:
        """Publish ``fact`` as it is, with the Msg-Id version given (the caller keeps what it dedups by); one no
        service could read back goes as its ObjectRejected (:func:`readable`)."""
        await self._emit(readable(fact), version=version)

    async def _emit(self, fact: types.Fact, *, version: str) -> None:
        """:meth:`emit` of a fact known to be readable.

        With ``batch_facts``, a WorkloadObserved or WorkloadFinished is queued instead and emit returns at
        once: a task publishes what is queued as soon as the watcher waits for the API server again, so a
        burst of jobs applied together (what one read of a watch stream brings) goes out as few FactBatch
        messages (:func:`~kueue_es.events.subjects.fact_batches`) instead of one stored and acked message
        each, and a fact seen alone still goes out alone, on its own subject. Any other fact first waits
        for the queued ones: the log keeps the order the watcher saw things in."""
        if self.batch_facts and isinstance(fact, types.WorkloadObserved | types.WorkloadFinished):
            self._pending.append((fact, version))
            if self._flushing is None or self._flushing.done():
                self._flushing = asyncio.get_running_loop().create_task(self._flush_when_idle())
            return
        if self._pending:
            await self.flush()
        await self.bus.publish(subjects.fact_message(fact, version=version))
        self.published += 1

    async def emit_together(self, facts: list[tuple[types.Fact, str]]) -> None:
        """Publish ``facts`` (each with its Msg-Id version, as :meth:`emit`) as one atomic batch
        (:meth:`~kueue_es.events.bus.base.Bus.publish_together`): what one write of an object changed, which Kueue's
        controllers see at once, reaches every reader at once too, so no decider cycle runs between them (two
        admission checks set to Retry by one status write are one eviction, naming both). Each fact keeps its own
        subject and Msg-Id; a batch refused because one of them is on the log already goes out one by one (each
        deduplicated). One fact alone is :meth:`emit`."""
        if not facts:
            return
        if len(facts) == 1:
            fact, version = facts[0]
            await self.emit(fact, version=version)
            return
        if self._pending:
            await self.flush()
        messages = [subjects.fact_message(fact, version=version) for fact, version in facts]
        try:
            await self.bus.publish_together(messages)
        except BusError as err:
            # one of them on the log already, or the batch's fate unknown (a timeout, a lost connection): one by one,
            # each tried again as a publish is and deduplicated by its Msg-Id should the batch have landed
            if not isinstance(err, DuplicateBatchError):
                log.warning("facts_not_published_together", facts=len(messages), error=str(err))
            for message in messages:
                await self.bus.publish(message)
        self.published += len(messages)

    async def _flush_when_idle(self) -> None:
        """Publish the queued facts once the loop comes round (the watcher waits for its next read), and again
        every :data:`RETRY_SECONDS` while the bus refuses them."""
        await asyncio.sleep(0)
        while self._pending:
            try:
                await self.flush()
            except BusError as err:
                log.warning(
                    "facts_not_published", facts=len(self._pending), error=str(err), retry_seconds=RETRY_SECONDS
                )
                await asyncio.sleep(RETRY_SECONDS)

    async def flush(self) -> None:
        """Publish every queued fact, in order, as FactBatch messages (a run of one as the fact's own message).
        Raises BusError when the bus refuses one: it and those after it stay queued, in order."""
        async with self._flush_lock:
            while self._pending:
                run, self._pending = self._pending, []
                self.unpublished = len(run)
                messages = subjects.fact_batches(run, source=FACT_SOURCE)
                sent = 0
                try:
                    for message in messages:
                        await self.bus.publish(message)
                        sent += 1
                except BaseException:
                    # the messages not sent go back in front, made again from their facts (Msg-Ids from the same
                    # facts: a batch the server stored before the error dedups when sent again whole)
                    done = sum(_facts_in(m) for m in messages[:sent])
                    self._pending = run[done:] + self._pending
                    self.unpublished = len(self._pending)
                    raise
                self.published += len(run)
                self.unpublished = 0

    async def close(self) -> None:
        """Publish what is queued (a graceful stop) and stop the flushing task; BusError when the bus refuses."""
        if self._flushing is not None:
            self._flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flushing
        await self.flush()

    async def delete_workload(
        self,
        key: Key,
        *,
        version: str,
        uid: str = "",
        reason: str = "",
        at_ms: int | msgspec.UnsetType = msgspec.UNSET,
    ) -> None:
        """ObjectDeleted for a job's workload (the UID of the one last published when ``uid`` is not known;
        ``reason``: the fact's, :data:`~kueue_es.events.types.NO_MATCHING_WORKLOAD` or ""; ``at_ms`` when it
        was seen gone, left out when not told)."""
        known = self.workloads.get(key)
        uid = uid or (known.metadata.uid if known is not None else "")
        await self.publish(
            types.ObjectDeleted(
                kind="Workload", namespace=key[0], name=key[1], uid=uid, reason=reason or msgspec.UNSET, at_ms=at_ms
            ),
            version=version,
        )

    def keep_active(self, wl_key: Key, fact: types.Fact) -> types.Fact:
        """A job's workload keeps the ``spec.active`` last published for it (set on its Workload object)."""
        known = self.workloads.get(wl_key)
        if isinstance(fact, types.WorkloadObserved) and known is not None and not known.spec.active:
            spec = msgspec.structs.replace(fact.workload.spec, active=False)
            return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, spec=spec))
        return fact

    def keep_created(self, wl_key: Key, fact: types.Fact) -> types.Fact:
        """A job's workload keeps the creation time last published for it: a Workload made again for a job
        whose Workload was deleted by hand was created then, not with the job."""
        known = self.workloads.get(wl_key)
        if not isinstance(fact, types.WorkloadObserved) or known is None or known.owner is None:
            return fact
        created = known.metadata.creation_timestamp_ms
        if created == fact.workload.metadata.creation_timestamp_ms or known.metadata.uid != fact.workload.metadata.uid:
            return fact
        meta = msgspec.structs.replace(fact.workload.metadata, creation_timestamp_ms=created)
        return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, metadata=meta))

    def workload_ref(self, wl_key: Key) -> types.WorkloadRef:
        """A reference to a job's workload, with the UID of the one last published ("" when none was)."""
        known = self.workloads.get(wl_key)
        return types.WorkloadRef(namespace=wl_key[0], name=wl_key[1], uid=known.metadata.uid if known else "")


def class_of(ref: models.PriorityClassRef | None) -> tuple[str, str] | None:
    """A workload's priority class as ``(kind, name)``, None for none."""
    return None if ref is None else (ref.kind, ref.name)


def log_rejection(fact: types.Fact) -> None:
    """Log an ObjectRejected fact as a warning naming the object, the field and the problem."""
    if isinstance(fact, types.ObjectRejected):
        log.warning(
            "object_rejected",
            kind=fact.kind,
            name=fact.name,
            namespace=fact.namespace,
            field=fact.field,
            problem=fact.problem,
        )
