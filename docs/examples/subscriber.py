"""A subscriber of kueue-es's public stream KQ_PUB, written from docs/subscribing.md alone.

It needs nats-py and jsonschema (``pip install nats-py jsonschema``), not kueue-es: it reads the AsyncAPI
document (``kueue-es events asyncapi --output asyncapi.json``) for the schemas, connects as the read-only
NATS user ``reader``, reads KQ_PUB from its first message (an ordered consumer) and for every message:

- validates its payload against the schema of its ``Kq-Type`` and its headers against the message's
  headers schema in the document;
- checks a decision against its DecisionRecord (published before it on ``kq.pub.rec.>``): the record's
  bytes hash to ``Kq-Record-Digest``, the decision's Msg-Id is ``<decision_id>:<index>``; a decision the
  record carries (event schema 17: ``Kq-Entry: <index>/<n>``, the record's ``Kq-Seq``) is the record's
  decision ``index``; else (older logs), once every output of the record came, the SHA-256 over the
  outputs (each prefixed with its length, 8 bytes big endian) is the record's ``outputsSha256``;
- prints each admission: a workload admitted, its ClusterQueue and its flavors (from the
  WorkloadAdmitted when it carries ``podSetAssignments``, else from the QuotaReserved before it).

    python docs/examples/subscriber.py --nats nats://127.0.0.1:PORT --user reader \\
        --password-file RUN_DIR/creds/reader.password --asyncapi asyncapi.json [--admissions N] [--timeout S]

Exits 0 once ``--admissions`` workloads were admitted (0: runs until Ctrl-C), 1 when a message fails a
check (it says which), 2 when the admissions did not come within ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import nats
import referencing
import referencing.jsonschema
from nats.js.api import DeliverPolicy

ADMITTED = "WorkloadAdmitted"
RESERVED = "QuotaReserved"


class Checker:
    """Validates messages against the AsyncAPI document and decisions against their records."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        resource = referencing.Resource.from_contents(
            document, default_specification=referencing.jsonschema.DRAFT202012
        )
        self.registry = referencing.Registry().with_resource("urn:asyncapi", resource)
        self._validators: dict[str, jsonschema.Draft202012Validator] = {}
        self.records: dict[int, dict[str, Any]] = {}  # Kq-Seq of a record -> what is known of its batch

    def _validator(self, pointer: str) -> jsonschema.Draft202012Validator:
        if pointer not in self._validators:
            self._validators[pointer] = jsonschema.Draft202012Validator(
                {"$ref": f"urn:asyncapi{pointer}"}, registry=self.registry
            )
        return self._validators[pointer]

    def check(self, subject: str, headers: dict[str, str], data: bytes) -> dict[str, Any]:
        """The payload, once it passed every check; raises ValueError saying what failed."""
        kind = headers.get("Kq-Type", "")
        channel = "record" if subject.startswith("kq.pub.rec.") else "workload"
        message = self.document["channels"][channel]["messages"].get(kind)
        if message is None:
            raise ValueError(f"{subject}: Kq-Type {kind!r} is not a message of channel {channel}")
        name = message["$ref"].rsplit("/", 1)[1]
        payload = json.loads(data)
        for pointer, instance in (
            (f"#/components/schemas/{kind}", payload),
            (f"#/components/messages/{name}/headers", headers),
        ):
            errors = sorted(self._validator(pointer).iter_errors(instance), key=lambda e: list(e.path))
            if errors:
                raise ValueError(f"{subject} #{headers.get('Kq-Seq')}: {pointer}: {errors[0].message}")
        if "Kq-Record-Seq" in headers:
            self._verify(headers, data, payload)
        return payload

    def _verify(self, headers: dict[str, str], data: bytes, payload: dict[str, Any]) -> None:
        seq, record_seq = int(headers["Kq-Seq"]), int(headers["Kq-Record-Seq"])
        if headers["Kq-Type"] == "DecisionRecord":  # the record itself
            if seq != record_seq or hashlib.sha256(data).hexdigest() != headers["Kq-Record-Digest"]:
                raise ValueError(f"record #{seq}: its bytes do not hash to Kq-Record-Digest")
            # a record of finished releases only (in its bytes) has nothing to wait for
            if payload["outputCount"] or payload.get("decisions"):
                self.records[seq] = {"record": payload, "outputs": {}}
            return
        batch = self.records.get(record_seq)
        if batch is None:
            raise ValueError(f"decision #{seq}: its record #{record_seq} was not published before it")
        record = batch["record"]
        if seq == record_seq:  # schema 17: a decision the record carries, its place in Kq-Entry
            self._verify_carried(seq, headers, payload, record)
            return
        index = seq - record_seq
        if headers["Nats-Msg-Id"] != f"{record['decisionId']}:{index}" or not 1 <= index <= record["outputCount"]:
            raise ValueError(f"decision #{seq}: Msg-Id {headers['Nats-Msg-Id']!r} is not output {index} of its record")
        batch["outputs"][index] = data
        if len(batch["outputs"]) == record["outputCount"]:
            digest = hashlib.sha256()
            for i in range(1, record["outputCount"] + 1):
                chunk = batch["outputs"][i]
                digest.update(len(chunk).to_bytes(8, "big") + chunk)
            if digest.hexdigest() != record["outputsSha256"]:
                raise ValueError(f"record #{record_seq}: its outputs do not hash to its outputsSha256")
            del self.records[record_seq]

    def _verify_carried(
        self, seq: int, headers: dict[str, str], payload: dict[str, Any], record: dict[str, Any]
    ) -> None:
        carried = record.get("decisions") or []
        index, _, count = headers.get("Kq-Entry", "").partition("/")
        if not index.isdigit() or count != str(len(carried)) or not 1 <= int(index) <= len(carried):
            raise ValueError(
                f"decision #{seq}: Kq-Entry {headers.get('Kq-Entry')!r} is not one of its record's decisions"
            )
        if headers["Nats-Msg-Id"] != f"{record['decisionId']}:{index}" or payload != carried[int(index) - 1]:
            raise ValueError(f"decision #{seq}: it is not decision {index} its record carries")
        if int(index) == len(carried):
            del self.records[seq]


def flavors_of(payload: dict[str, Any]) -> dict[str, str] | None:
    """The flavor per resource of every pod set of a QuotaReserved (or a WorkloadAdmitted that has them)."""
    assignments = payload.get("podSetAssignments")
    if not assignments:
        return None
    out: dict[str, str] = {}
    for assignment in assignments:
        out.update(assignment.get("flavors", {}))
    return out


async def subscribe(args: argparse.Namespace) -> int:
    document = json.loads(Path(args.asyncapi).read_text())
    checker = Checker(document)
    password = Path(args.password_file).read_text().strip() if args.password_file else None
    nc = await nats.connect(args.nats, user=args.user, password=password)
    admitted: dict[str, dict[str, str] | None] = {}
    reserved: dict[str, dict[str, str] | None] = {}
    try:
        js = nc.jetstream()
        sub = await js.subscribe("kq.pub.>", stream="KQ_PUB", ordered_consumer=True, deliver_policy=DeliverPolicy.ALL)
        async with asyncio.timeout(args.timeout or None):
            while not args.admissions or len(admitted) < args.admissions:
                msg = await sub.next_msg(timeout=None)
                headers = dict(msg.headers or {})
                try:
                    payload = checker.check(msg.subject, headers, msg.data)
                except ValueError as err:
                    print(f"INVALID {err}", flush=True)
                    return 1
                kind = headers["Kq-Type"]
                workload = headers.get("ce-subject", "")
                if kind == RESERVED:
                    reserved[workload] = flavors_of(payload)
                elif kind == ADMITTED and workload not in admitted:
                    flavors = flavors_of(payload) or reserved.get(workload)
                    admitted[workload] = flavors
                    print(
                        f"admitted {workload} in {payload['clusterQueue']} flavors {json.dumps(flavors)}"
                        f" (#{headers['Kq-Seq']}, verified by record #{headers['Kq-Record-Seq']}"
                        f" {headers['Kq-Record-Id']}, at {headers['ce-time']})",
                        flush=True,
                    )
                elif args.verbose:
                    print(f"{kind} {workload} #{headers['Kq-Seq']}", flush=True)
    except TimeoutError:
        print(f"TIMEOUT {len(admitted)} of {args.admissions} admissions in {args.timeout:g}s", flush=True)
        return 2
    finally:
        await nc.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats", required=True, help="NATS URL, e.g. nats://127.0.0.1:4222")
    parser.add_argument("--user", default="reader", help="NATS user (default reader)")
    parser.add_argument("--password-file", default=None, help="file holding its password")
    parser.add_argument("--asyncapi", required=True, help="the document of `kueue-es events asyncapi --output F`")
    parser.add_argument("--admissions", type=int, default=0, help="exit 0 after this many admitted workloads")
    parser.add_argument("--timeout", type=float, default=0, help="give up (exit 2) after this many seconds")
    parser.add_argument("--verbose", action="store_true", help="print every message, not only admissions")
    return asyncio.run(subscribe(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
