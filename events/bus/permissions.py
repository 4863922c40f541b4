"""Who may do what on the log: the one table of NATS users and their permissions.

Both places a nats-server is configured read it: ``deploy/base/nats-accounts.conf``
is generated from it (:func:`accounts_conf`; a test checks the committed file is
up to date), and ``kueue-es up`` / ``kueue-es demo`` put the same users, with
random passwords, into the config of the nats-server they start
(:func:`accounts_config`, through :class:`kueue_es.events.bus.server.LocalAuth`).

One account, ``KQ``, with JetStream. ``admin`` may do anything (create and
update the stream: :func:`kueue_es.events.bus.nats.ensure_log_stream`); every
other user may only make the JetStream API calls a service makes on an existing
stream (stream info, single-message reads, ordered consumers and their flow
control) and publish its own subjects (events/subjects.py):

- ``watcher``: facts, ``kq.in.>``;
- ``admitter``, ``preemptor``, ``tas-placer``, ``multikueue``: decisions, each only on its own head
  ``kq.dec.*.head.<user>`` and on ``kq.dec.*.wl.>``. The batches of all three are
  checked against one optimistic-concurrency token, the last sequence on every head
  of the partition (``kq.dec.<p>.head.*``, events/subjects.py), but each may write
  only its own: the preemptor cannot publish a record on the admitter's head. The
  per-workload subjects are shared (a workload's decisions are one subject), so
  what a decider's batch may contain is the fold's check
  (:mod:`kueue_es.projections.batches`: a record on ``head.<user>`` must name that
  decider's role, and its outputs must be kinds that role makes; any other batch
  is an orphan, folded by no service);
  Each decider also holds its lease (:mod:`kueue_es.events.bus.leases`): it writes and
  follows only its own keys of the bucket ``KQ_LEASES``, ``$KV.KQ_LEASES.<user>.>``, and
  reads the bucket (stream info and single messages of ``KV_KQ_LEASES``), so a
  preemptor cannot take the admitter's lease;
- ``dispatcher``: dispatch results ``kq.disp.>`` (per workload, and per record
  ``kq.disp.<cluster>.rec.<partition>.<seq>``, which it also reads back) and ``kq.in.wl.>`` (the
  WorkloadStopped and ObjectDeleted of a workload whose Job is gone: so it can
  also forge other facts about workloads); the only user that may bind, read
  and ack the durable consumer ``dispatcher``;
- ``multikueue-edge`` (services/multikueue_edge): the MultiKueue facts about the workers,
  ``kq.in.remote.>`` and ``kq.in.worker.>``, and the dispatch results of its remote writes,
  ``kq.disp.<cluster>.wl.>`` for every cluster but ``local``; its lease keys;
- ``reader``: publishes nothing on the log; reads ``KQ_LOG`` and ``KQ_PUB``;
- ``publisher`` (``kueue-es service publisher``, services/publisher): publishes nothing on the log;
  reads ``KQ_LOG`` and writes the public stream ``KQ_PUB`` (``kq.pub.>``; its info and last message,
  to resume), the only user but admin that may;
- ``compactor`` (``kueue-es compact``, kueue_es/snapshots.py): publishes nothing on the log;
  writes and deletes snapshots in the Object Store bucket ``KQ_SNAPSHOTS`` (its stream
  ``OBJ_KQ_SNAPSHOTS``), reads the dispatcher's consumer's ack floor, and is the only
  user but admin that may purge ``KQ_LOG`` (below a verified snapshot: the stream allows
  purges, these permissions keep them to this user).

Every user reads the snapshot bucket (services start from a snapshot). No user but
``admin`` (and ``compactor`` for the purges above) may create, update, delete or purge
a stream, delete a message, or delete a consumer (explicit denies, on top of the allow
lists).
"""

from __future__ import annotations

import json

ACCOUNT = "KQ"
ADMIN = "admin"
READER = "reader"
COMPACTOR = "compactor"
PUBLISHER = "publisher"
MULTIKUEUE_EDGE = "multikueue-edge"
SERVICE_USERS = ("watcher", "admitter", "preemptor", "tas-placer", "multikueue", "dispatcher", MULTIKUEUE_EDGE)
USERS = (ADMIN, *SERVICE_USERS, READER, COMPACTOR, PUBLISHER)

LOG = "KQ_LOG"
PUBLIC = "KQ_PUB"
LEASES = "KV_KQ_LEASES"
"""The stream of the deciders' lease bucket KQ_LEASES (kueue_es.events.bus.leases)."""
DURABLE = "dispatcher"
SNAPSHOTS = "OBJ_KQ_SNAPSHOTS"  # the stream of the Object Store bucket KQ_SNAPSHOTS

FACTS = ("kq.in.>",)
DECIDERS = ("admitter", "preemptor", "tas-placer", "multikueue")
DISPATCH = ("kq.disp.>", "kq.in.wl.>")
#: The MultiKueue edge: its facts about the workers and the dispatch results of its remote writes.
EDGE = ("kq.in.remote.>", "kq.in.worker.>", "kq.disp.*.wl.>")
#: ... but never a dispatch result of the local cluster (the dispatcher's).
EDGE_DENY = ("kq.disp.local.>",)
LEASE_USERS = (*DECIDERS, "dispatcher", MULTIKUEUE_EDGE)
"""The users with a key in KQ_LEASES: the deciders, and the dispatcher's warm standby (``--standby-lease``)."""


def decisions(user: str) -> tuple[str, ...]:
    """What decider ``user`` may publish: its own head in every partition, and the per-workload decisions."""
    return (f"kq.dec.*.head.{user}", "kq.dec.*.wl.>")


def lease_keys(user: str) -> tuple[str, ...]:
    """The subjects of decider ``user``'s lease keys (``<user>.<partition>`` in KQ_LEASES): what it writes and follows."""
    return (f"$KV.KQ_LEASES.{user}.>",)


def _lease_calls() -> tuple[str, ...]:
    """The JetStream API calls that read the lease bucket: its info (binding it) and single messages (a key)."""
    return (f"$JS.API.STREAM.INFO.{LEASES}", f"$JS.API.STREAM.MSG.GET.{LEASES}")


def _reads(stream: str) -> tuple[str, ...]:
    """The JetStream API calls that read ``stream``: its info, single messages, ordered consumers."""
    return (
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.FC.{stream}.>",
    )


def _snapshot_reads() -> tuple[str, ...]:
    """What reading an object of the snapshot bucket takes (nats-py's object store finds the chunks'
    stream by name, reads the object's meta message and the chunks through an ordered consumer)."""
    return (*_reads(SNAPSHOTS), "$JS.API.STREAM.NAMES", f"$JS.API.DIRECT.GET.{SNAPSHOTS}.>")


#: What the compactor may do beyond reading: write snapshot objects, purge the log (and old
#: snapshots' chunks), read the dispatcher's consumer's ack floor and where the publisher stands in
#: KQ_PUB (its last message: a purge leaves both what they have not done).
COMPACTS = (
    "$O.KQ_SNAPSHOTS.>",
    f"$JS.API.STREAM.PURGE.{LOG}",
    f"$JS.API.STREAM.PURGE.{SNAPSHOTS}",
    f"$JS.API.CONSUMER.INFO.{LOG}.{DURABLE}",
    f"$JS.API.STREAM.INFO.{PUBLIC}",
    f"$JS.API.STREAM.MSG.GET.{PUBLIC}",
)

#: What the publisher may do beyond reading the log: write KQ_PUB, and read where it stands there.
PUBLISHES = ("kq.pub.>", f"$JS.API.STREAM.INFO.{PUBLIC}", f"$JS.API.STREAM.MSG.GET.{PUBLIC}")

#: What no user but admin may call, whatever its allow list says.
ADMIN_ONLY = (
    "$JS.API.STREAM.CREATE.>",
    "$JS.API.STREAM.UPDATE.>",
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.CONSUMER.DELETE.>",
)
#: Only the dispatcher binds its durable consumer.
DURABLE_ONLY = (f"$JS.API.CONSUMER.CREATE.{LOG}.{DURABLE}", f"$JS.API.CONSUMER.CREATE.{LOG}.{DURABLE}.>")
DURABLE_CALLS = (
    f"$JS.API.CONSUMER.DURABLE.CREATE.{LOG}.{DURABLE}",
    f"$JS.API.CONSUMER.INFO.{LOG}.{DURABLE}",
    f"$JS.API.CONSUMER.MSG.NEXT.{LOG}.{DURABLE}",
    f"$JS.ACK.{LOG}.{DURABLE}.>",
)

PUBLISH: dict[str, tuple[str, ...]] = {
    "watcher": FACTS + _reads(LOG) + _snapshot_reads(),
    "admitter": decisions("admitter") + _reads(LOG) + lease_keys("admitter") + _lease_calls() + _snapshot_reads(),
    "preemptor": decisions("preemptor") + _reads(LOG) + lease_keys("preemptor") + _lease_calls() + _snapshot_reads(),
    "tas-placer": decisions("tas-placer") + _reads(LOG) + lease_keys("tas-placer") + _lease_calls() + _snapshot_reads(),
    "multikueue": decisions("multikueue") + _reads(LOG) + lease_keys("multikueue") + _lease_calls() + _snapshot_reads(),
    MULTIKUEUE_EDGE: EDGE + _reads(LOG) + lease_keys(MULTIKUEUE_EDGE) + _lease_calls() + _snapshot_reads(),
    "dispatcher": DISPATCH
    + _reads(LOG)
    + DURABLE_CALLS
    + lease_keys("dispatcher")
    + _lease_calls()
    + _snapshot_reads(),
    "reader": _reads(LOG) + _reads(PUBLIC) + (f"$JS.API.DIRECT.GET.{LOG}",) + _snapshot_reads(),
    COMPACTOR: _reads(LOG) + _snapshot_reads() + COMPACTS,
    PUBLISHER: PUBLISHES + _reads(LOG) + _snapshot_reads(),
}
"""Per user but admin: the subjects it may publish (its events and its JetStream API calls)."""

SUBSCRIBE = ("_INBOX.>",)
"""What every user but admin may subscribe to: replies and deliveries come to its inbox (and a
decider to its own lease keys, to follow them: :func:`lease_keys`)."""


def permissions(user: str) -> dict[str, object] | None:
    """The nats-server ``permissions`` block of ``user``; None for admin (everything)."""
    if user == ADMIN:
        return None
    deny: tuple[str, ...] = ADMIN_ONLY if user == "dispatcher" else ADMIN_ONLY + DURABLE_ONLY
    if user == MULTIKUEUE_EDGE:
        deny += EDGE_DENY
    if user == COMPACTOR:  # its purges (COMPACTS) are allowed by name; every other stream's stays denied
        deny = tuple(d for d in deny if d != "$JS.API.STREAM.PURGE.>") + (f"$JS.API.STREAM.PURGE.{PUBLIC}",)
    return {
        "publish": {"allow": list(PUBLISH[user]), "deny": list(deny)},
        "subscribe": {"allow": list(SUBSCRIBE + (lease_keys(user) if user in LEASE_USERS else ()))},
    }


def password_variable(user: str) -> str:
    """The environment variable deploy/'s nats-server reads ``user``'s password from."""
    return f"KQ_{user.upper().replace('-', '_')}_PASSWORD"


def accounts_config(passwords: dict[str, str]) -> dict[str, object]:
    """The ``accounts`` block of a nats-server config with these users' ``passwords`` (every user of USERS)."""
    users: list[dict[str, object]] = []
    for user in USERS:
        entry: dict[str, object] = {"user": user, "password": passwords[user]}
        granted = permissions(user)
        if granted is not None:
            entry["permissions"] = granted
        users.append(entry)
    return {ACCOUNT: {"jetstream": "enabled", "users": users}}


HEADER = """\
# Who may do what on the kueue-es log. GENERATED from kueue_es/events/bus/permissions.py
# (the same table `kueue-es up` and `kueue-es demo` give their local nats-server); do not
# edit: python -m kueue_es.events.bus.permissions > deploy/base/nats-accounts.conf
#
# One account, KQ, with JetStream; passwords from the environment ($KQ_..._PASSWORD,
# Secret kueue-es-nats-users: deploy/README.md).
#
#   admin               everything: creates and updates the streams (the Job kueue-es-nats-setup)
#   watcher             kq.in.>                          facts
#   admitter            kq.dec.*.head.admitter,          decisions: each decider only on its own
#                       kq.dec.*.wl.>                    head (the record names its role; the fold
#   preemptor           kq.dec.*.head.preemptor, ...     checks the outputs are kinds that role makes)
#   tas-placer          kq.dec.*.head.tas-placer, ...    each decider also writes and follows its own
#   multikueue          kq.dec.*.head.multikueue, ...    lease keys $KV.KQ_LEASES.<user>.> (standby)
#   dispatcher          kq.disp.>, kq.in.wl.>            dispatch results, facts of gone workloads;
#                                                        the only user of the durable "dispatcher";
#                                                        its lease keys $KV.KQ_LEASES.dispatcher.>
#   multikueue-edge     kq.in.remote.>, kq.in.worker.>,  MultiKueue's facts about the workers and the
#                       kq.disp.*.wl.> (not local)       results of its remote writes; its lease keys
#   reader              nothing                          reads KQ_LOG and KQ_PUB, and KQ_LOG in
#                                                        Direct Get batches (kueue-es replay)
#   compactor           $O.KQ_SNAPSHOTS.>                snapshots (kueue-es compact); the only
#                                                        user but admin that may purge KQ_LOG
#   publisher           kq.pub.>                         the public stream KQ_PUB from the verified
#                                                        log (kueue-es service publisher)
#
# Every user but admin reads KQ_LOG (stream info, single messages, ordered consumers) and the
# snapshot bucket KQ_SNAPSHOTS, and may not create, update, delete or purge a stream (but the
# compactor's purges), delete a message or a consumer.
"""


def accounts_conf() -> str:
    """deploy/base/nats-accounts.conf: the table, passwords as ``$KQ_<USER>_PASSWORD`` references."""
    lines = [HEADER, "accounts {", f"  {ACCOUNT} {{", "    jetstream: enabled", "    users: ["]
    for user in USERS:
        lines += ["      {", f"        user: {user}", f"        password: ${password_variable(user)}"]
        granted = permissions(user)
        if granted is not None:
            lines.append("        permissions: {")
            for direction in ("publish", "subscribe"):
                block = granted[direction]
                assert isinstance(block, dict)
                lines.append(f"          {direction}: {{")
                for key in ("allow", "deny"):
                    if key in block:
                        lines.append(f"            {key}: {json.dumps(block[key])}")
                lines.append("          }")
            lines.append("        }")
        lines.append("      }")
    lines += ["    ]", "  }", "}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(accounts_conf(), end="")
