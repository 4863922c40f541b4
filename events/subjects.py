"""Subject names on the log, and the messages that carry events to them.

Layout (ARCHITECTURE.md §2, research/event-sourcing.md §5.3):

- ``kq.in.<kind>.<ns|_>.<name>``: facts from the cluster;
- ``kq.dec.<partition>.head.<role>``: one DecisionRecord per committed batch, on the head
  of the decider that made it (``admitter``, ``preemptor``, ``tas-placer``, ``multikueue``: its NATS user;
  ``seed`` for the scenario runner). The optimistic-concurrency token is the last sequence
  on every head of the partition, ``kq.dec.<partition>.head.*`` (:func:`heads_of`);
- ``kq.dec.<partition>.wl.<ns>.<name>``: per-workload decisions;
- ``kq.disp.<cluster>.wl.<ns>.<name>``: dispatch results (``local``: the dispatcher; a MultiKueue
  worker's name: the MultiKueue edge's remote creates and deletes);
- ``kq.disp.<cluster>.rec.<partition>.<record seq>``: the dispatcher's DispatchBatchApplied results of
  one DecisionRecord's decisions (schema version 5);
- ``kq.in.remote.<cluster>.<ns>.<name>`` and ``kq.in.worker.<cluster>``: the MultiKueue edge's facts
  (a workload's copy on a worker, a worker's connectivity).

Kubernetes names may contain dots, which NATS reads as token separators, so a
dot in a name is written ``%2E``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kueue_es.events import codec, types
from kueue_es.events.bus.base import OutgoingMessage

DEFAULT_PARTITION = "p0"
DEFAULT_CLUSTER = "local"

_SCHEMA_HEADER = str(types.SCHEMA_VERSION)
"""The ``Kq-Schema`` header of every message this module makes."""

FACTS = "kq.in.>"
DECISIONS = "kq.dec.>"
DISPATCH = "kq.disp.>"

_FACT_KIND_TOKENS = {
    "ResourceFlavor": "rf",
    "ClusterQueue": "cq",
    "Cohort": "cohort",
    "LocalQueue": "lq",
    "WorkloadPriorityClass": "wpc",
    "Workload": "wl",
    "Namespace": "ns",
    "AdmissionCheck": "ac",
    "Configuration": "config",
    "SchedulingRequest": "cmd",
    "Topology": "topo",
    "Node": "node",
    "Pod": "pod",
}


def token(name: str) -> str:
    """One subject token for a Kubernetes name: ``_`` when empty, dots escaped."""
    return name.replace("%", "%25").replace(".", "%2E") if name else "_"


HEAD_TOKENS: dict[str, str] = {
    "admit": "admitter",
    "preempt": "preemptor",
    "place": "tas-placer",
    "multikueue": "multikueue",
    "seed": "seed",
}
"""A DecisionRecord's role -> the last token of its head subject: the NATS user of the decider
that makes it (events/bus/permissions.py lets each decider publish only its own head), and
``seed`` for the scenario runner's set-up batches."""

HEADS = "kq.dec.*.head.*"
"""Every head subject of every partition: where the DecisionRecords are."""

OLD_HEADS = "kq.dec.*.head"
"""Where kueue-es before per-role heads put every DecisionRecord (``kq.dec.<partition>.head``)."""


class UnknownRoleError(ValueError):
    """A DecisionRecord role with no head subject (not in :data:`HEAD_TOKENS`)."""


def head_subject(role: str, partition: str = DEFAULT_PARTITION) -> str:
    """The head subject of ``role``'s DecisionRecords (a record's role: ``admit``, ``preempt``,
    ``place``, ``seed``) in ``partition``: ``kq.dec.<partition>.head.<user>``.

    Raises UnknownRoleError for a role without a head (only the roles of HEAD_TOKENS make decisions).
    """
    head = HEAD_TOKENS.get(role)
    if head is None:
        raise UnknownRoleError(f"The role {role!r} has no head subject; the roles are {sorted(HEAD_TOKENS)}.")
    return f"kq.dec.{partition}.head.{head}"


def heads_of(partition: str = DEFAULT_PARTITION) -> str:
    """Filter for every head of ``partition``: the optimistic-concurrency check of a batch is
    against the last message on any of them (``Nats-Expected-Last-Subject-Sequence-Subject``)."""
    return f"kq.dec.{partition}.head.*"


def head_token(subject: str) -> str | None:
    """The last token of a head subject (``kq.dec.<p>.head.<token>``), None for any other subject."""
    tokens = subject.split(".")
    if len(tokens) == 5 and tokens[0] == "kq" and tokens[1] == "dec" and tokens[3] == "head":
        return tokens[4]
    return None


def is_old_head(subject: str) -> bool:
    """True for ``kq.dec.<partition>.head``, the single head of the layout before per-role heads."""
    tokens = subject.split(".")
    return len(tokens) == 4 and tokens[0] == "kq" and tokens[1] == "dec" and tokens[3] == "head"


def decisions_of(partition: str = DEFAULT_PARTITION) -> str:
    """Filter for every decision of one partition."""
    return f"kq.dec.{partition}.>"


def workload_decision_subject(ref: types.WorkloadRef, partition: str = DEFAULT_PARTITION) -> str:
    """Subject of a per-workload decision."""
    return f"kq.dec.{partition}.wl.{token(ref.namespace)}.{token(ref.name)}"


def dispatch_subject(ref: types.WorkloadRef, cluster: str = DEFAULT_CLUSTER) -> str:
    """Subject of a dispatch result."""
    return f"kq.disp.{cluster}.wl.{token(ref.namespace)}.{token(ref.name)}"


def record_dispatch_subject(partition: str, record_seq: int, cluster: str = DEFAULT_CLUSTER) -> str:
    """Subject of the DispatchBatchApplied results of the DecisionRecord at ``record_seq`` of
    ``partition``: ``kq.disp.<cluster>.rec.<partition>.<record_seq>`` (schema version 5, issue 18)."""
    return f"kq.disp.{cluster}.rec.{partition}.{record_seq}"


def remote_subject(ref: types.WorkloadRef, cluster: str) -> str:
    """Subject of a RemoteWorkloadObserved: ``kq.in.remote.<cluster>.<ns>.<name>``."""
    return f"kq.in.remote.{token(cluster)}.{token(ref.namespace)}.{token(ref.name)}"


def worker_subject(cluster: str) -> str:
    """Subject of a WorkerClusterConnectivity: ``kq.in.worker.<cluster>``."""
    return f"kq.in.worker.{token(cluster)}"


def fact_subject(event: types.Fact) -> str:
    """Subject of a fact, keyed by the object it is about (MultiKueue's remote facts: by worker too)."""
    if isinstance(event, types.RemoteWorkloadObserved):
        return remote_subject(event.workload, event.cluster)
    if isinstance(event, types.WorkerClusterConnectivity):
        return worker_subject(event.cluster)
    return _identity_subject(fact_identity(event))


def _identity_subject(identity: tuple[str, str, str]) -> str:
    """``kq.in.<kind>.<ns|_>.<name>`` of a fact's ``(kind, namespace, name)``."""
    kind, namespace, name = identity
    kind_token = _FACT_KIND_TOKENS.get(kind, kind.lower())
    return f"kq.in.{kind_token}.{token(namespace)}.{token(name)}"


def fact_identity(event: types.Fact) -> tuple[str, str, str]:
    """``(kind, namespace, name)`` of the object a fact is about."""
    match event:
        case types.ResourceFlavorObserved(flavor=obj):
            return "ResourceFlavor", "", obj.metadata.name
        case types.ClusterQueueObserved(cluster_queue=obj):
            return "ClusterQueue", "", obj.metadata.name
        case types.CohortObserved(cohort=obj):
            return "Cohort", "", obj.metadata.name
        case types.LocalQueueObserved(local_queue=obj):
            return "LocalQueue", obj.metadata.namespace, obj.metadata.name
        case types.WorkloadPriorityClassObserved(priority_class=obj):
            return "WorkloadPriorityClass", "", obj.metadata.name
        case types.WorkloadObserved(workload=obj):
            return "Workload", obj.metadata.namespace, obj.metadata.name
        case types.AdmissionCheckObserved(admission_check=obj):
            return "AdmissionCheck", "", obj.metadata.name
        case types.NamespaceObserved(namespace=obj):
            return "Namespace", "", obj.metadata.name
        case types.ConfigurationObserved(configuration=obj):
            return "Configuration", "", obj.metadata.name
        case types.TopologyObserved(topology=obj):
            return "Topology", "", obj.metadata.name
        case types.NodeObserved(node=obj):
            return "Node", "", obj.metadata.name
        case types.PodObserved(pod=obj):
            return "Pod", obj.namespace, obj.name
        case types.DeviceClassObserved(device_class=obj):
            return "DeviceClass", "", obj.metadata.name
        case types.ResourceClaimTemplateObserved(resource_claim_template=obj):
            return "ResourceClaimTemplate", obj.metadata.namespace, obj.metadata.name
        case types.ResourceSliceObserved(resource_slice=obj):
            return "ResourceSlice", "", obj.metadata.name
        case types.MultiKueueClusterObserved(cluster=obj):
            return "MultiKueueCluster", "", obj.metadata.name
        case types.MultiKueueConfigObserved(config=obj):
            return "MultiKueueConfig", "", obj.metadata.name
        case types.RemoteWorkloadObserved(workload=ref, cluster=cluster):
            return "RemoteWorkload", cluster, f"{ref.namespace}/{ref.name}"
        case types.WorkerClusterConnectivity(cluster=cluster):
            return "WorkerCluster", "", cluster
        case types.SchedulingRequested():
            return "SchedulingRequest", "", event.request_id
        case (
            types.WorkloadFinished(workload=ref)
            | types.WorkloadStopped(workload=ref)
            | types.WorkloadEvictionObserved(workload=ref)
            | types.AdmissionCheckStateChanged(workload=ref)
            | types.WorkloadPodsReady(workload=ref)
            | types.WorkloadReclaimablePods(workload=ref)
        ):
            return "Workload", ref.namespace, ref.name
        case types.ObjectDeleted() | types.ObjectRejected() | types.ChildJobObserved():
            return event.kind, event.namespace, event.name
    raise TypeError(f"not a fact: {type(event).__name__}")


def message(event: types.Event, *, subject: str, msg_id: str) -> OutgoingMessage:
    """Wrap an encoded event for the bus, with ``Kq-Type`` and ``Kq-Schema`` headers."""
    return OutgoingMessage(
        subject=subject,
        data=codec.encode(event),
        msg_id=msg_id,
        headers={"Kq-Type": codec.type_name(event), "Kq-Schema": _SCHEMA_HEADER},
    )


def fact_message(event: types.Fact, *, version: str = "") -> OutgoingMessage:
    """A fact ready to publish. ``version`` (the object's resourceVersion) makes the
    dedup id; without one the content digest does, so only an identical retry dedups.
    """
    # encoded and identified once: the bench harness makes one of these per workload created, finished
    # or stopped, and an encode and a match over every fact kind were each done twice (issue 18)
    data = codec.encode(event)
    identity = fact_identity(event)
    if isinstance(event, types.RemoteWorkloadObserved | types.WorkerClusterConnectivity):
        subject = fact_subject(event)  # by worker too
    else:
        subject = _identity_subject(identity)
    kind, namespace, name = identity
    type_name = codec.type_name(event)
    dedup = version or hashlib.sha256(data).hexdigest()[:24]
    return OutgoingMessage(
        subject=subject,
        data=data,
        msg_id=f"{type_name}:{kind}:{namespace}/{name}:{dedup}",
        headers={"Kq-Type": type_name, "Kq-Schema": _SCHEMA_HEADER},
    )


FACT_BATCH_PREFIX = "kq.in.batch."
"""Where :class:`~kueue_es.events.types.FactBatch` messages go: ``kq.in.batch.<source>`` (the publisher)."""

FACT_BATCH_MAX_FACTS = 500
"""Facts in one FactBatch at most."""

FACT_BATCH_MAX_BYTES = 256 * 1024
"""Payload bytes of one FactBatch at most (nats-server's default max_payload is 1 MiB); a fact larger than
this alone goes on its own subject."""

_BATCH_HEAD = b'{"type":"FactBatch","facts":['


def fact_batches(facts: Sequence[tuple[types.BatchedFact, str]], *, source: str) -> list[OutgoingMessage]:
    """``facts`` (each with the ``version`` :func:`fact_message` would dedup it by) as few messages as
    fit, in order: runs of them as FactBatch messages on ``kq.in.batch.<source>`` of at most
    :data:`FACT_BATCH_MAX_FACTS` facts and :data:`FACT_BATCH_MAX_BYTES` bytes, and a run of one as the
    fact's own message on its own subject (so a fact seen alone keeps its per-object subject).

    Each fact is encoded once: a batch's payload is its facts' payloads in a JSON list, which is what
    encoding the :class:`~kueue_es.events.types.FactBatch` gives byte for byte
    (tests/unit/test_fact_batch.py). Its Msg-Id digests the facts' own Msg-Ids, so a retry of the same
    run dedups. Raises ValueError for a ``source`` that is not one subject token.
    """
    if not source or any(c in source for c in ". *>"):
        raise ValueError(f"fact batch source {source!r}: must be one subject token")
    subject = FACT_BATCH_PREFIX + source
    out: list[OutgoingMessage] = []
    run: list[OutgoingMessage] = []
    size = len(_BATCH_HEAD) + 2

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            ids = "\n".join(m.msg_id for m in run)
            out.append(
                OutgoingMessage(
                    subject=subject,
                    data=_BATCH_HEAD + b",".join(m.data for m in run) + b"]}",
                    msg_id=f"FactBatch:{source}:{hashlib.sha256(ids.encode()).hexdigest()[:32]}",
                    headers={"Kq-Type": "FactBatch", "Kq-Schema": _SCHEMA_HEADER},
                )
            )
        run.clear()

    for fact, version in facts:
        message = fact_message(fact, version=version)
        if run and (len(run) >= FACT_BATCH_MAX_FACTS or size + len(message.data) + 1 > FACT_BATCH_MAX_BYTES):
            close()
            size = len(_BATCH_HEAD) + 2
        run.append(message)
        size += len(message.data) + 1
    close()
    return out
