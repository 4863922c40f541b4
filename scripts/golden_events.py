"""Write the golden payloads of every event type: tests/fixtures/events/v<version>/<Type>.json.

Usage (from the repository root)::

    python scripts/golden_events.py                 # this schema version, from real runs
    python scripts/golden_events.py --log tests/fixtures/logs/demo-preempt.jsonl   # a recorded log's

Without ``--log``: payloads made by the current code, taken from the recorded demo of this version
(tests/fixtures/logs/demo-preempt-v<version>.jsonl, first: a running system's, when there is one) and from the
core engine's run of every scenario; the few types neither makes (commands, bad input, a failed
dispatch, dynamic reclaim) are built here. Each file names its ``source``. Per type, from the
first of those that has one, the payload that shows the most distinct fields wins (then the
shortest).
Also writes the version's ``schema.json`` (``kueue-es events schema``).

With ``--log``: the payloads of a log recorded by an earlier version, byte for byte, in the
version its ``Kq-Schema`` headers name (the schema of that version is written by hand: check
out that version and run ``kueue-es events schema``).

Each file: ``{"headers": {"Kq-Schema", "Kq-Type"}, "subject", "source", "data"}`` where
``data`` is the payload, whose compact JSON (``separators=(",", ":")``, not ASCII-escaped) is
its bytes on the log. tests/unit/test_event_contract.py reads them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (list items share their list's path)."""
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}"
            paths.add(path)
            paths |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, prefix + "[]")
    return paths


def _log_messages(path: Path) -> Iterator[tuple[str, str, dict[str, str], str]]:
    for line in path.read_text().splitlines():
        raw = json.loads(line)
        yield raw["subject"], raw["data"], raw["headers"], f"{path.relative_to(ROOT)} #{raw['seq']}"


def _scenario_messages() -> Iterator[tuple[str, str, dict[str, str], str]]:
    import structlog

    from kueue_es.scenarios.core_engine import run_scenario
    from kueue_es.scenarios.loading import find_scenario_files, load_scenario

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    for path in find_scenario_files([ROOT / "tests" / "scenarios"]):
        run = run_scenario(load_scenario(path))
        for message in run.messages:
            headers = {**message.headers}
            yield message.subject, message.data.decode(), headers, f"{path.relative_to(ROOT)} (core engine)"


def _built() -> Iterator[tuple[str, str, dict[str, str], str]]:
    from kueue_es.events import codec, models, subjects, types

    ref = types.WorkloadRef(namespace="team-a", name="job-train-7f3c2", uid="0b6c3f9e-1d2a-4e5b-9c8d-7a6b5c4d3e2f")
    built: list[tuple[types.Event, str]] = [
        (types.SchedulingRequested(request_id="settle-1", mode="settle", role="admit"), ""),
        (
            types.ObjectRejected(
                kind="Job",
                namespace="team-a",
                name="train",
                field="spec.template.spec.containers[0].resources.requests.cpu",
                problem='quantity "two" is not a Kubernetes quantity',
                at_ms=1_796_198_953_000,
            ),
            "",
        ),
        (
            types.ChildJobObserved(
                api_version="batch/v1",
                kind="Job",
                namespace="team-a",
                name="train-workers-0",
                uid="5e1d2c3b-4a59-4867-9f8e-7d6c5b4a3928",
                ancestor=models.OwnerReference(
                    api_version="jobset.x-k8s.io/v1alpha2",
                    kind="JobSet",
                    name="train",
                    uid="9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
                ),
                at_ms=1_796_198_953_000,
            ),
            "",
        ),
        (
            types.WorkloadReclaimablePods(
                workload=ref, reclaimable_pods=[types.ReclaimablePod(name="workers", count=2)], at_ms=1_796_198_953_000
            ),
            "",
        ),
        (
            types.WorkloadEvictionObserved(
                workload=ref, reason="Preempted", message="By test", at_ms=1_796_198_953_000
            ),
            "",
        ),
        (
            types.DispatchApplied(
                workload=ref,
                decision_seq=41,
                action="StartJob",
                target="Job team-a/train",
                node_selector={"cloud.provider.com/accelerator": "gpu"},
            ),
            subjects.dispatch_subject(ref),
        ),
        (
            types.DispatchBatchApplied(
                partition="p0",
                record_seq=40,
                entries=[
                    types.DispatchEntry(
                        decision_seq=41,
                        workload=ref,
                        action="StartJob",
                        target="Job team-a/train",
                        node_selector={"cloud.provider.com/accelerator": "gpu"},
                    ),
                    types.DispatchEntry(
                        decision_seq=43, workload=types.WorkloadRef(namespace="team-a", name="old"), action="Evict"
                    ),
                ],
            ),
            subjects.record_dispatch_subject("p0", 40),
        ),
        (
            types.DispatchFailed(
                workload=ref,
                decision_seq=42,
                action="StartJob",
                status=409,
                reason="Conflict",
                message="the object has been modified; please apply your changes to the latest version",
                retryable=True,
            ),
            subjects.dispatch_subject(ref),
        ),
        (
            types.MultiKueueClusterObserved(
                cluster=models.MultiKueueCluster(
                    metadata=models.ObjectMeta(name="worker-1", uid="6f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"),
                    spec=models.MultiKueueClusterSpec(
                        cluster_source=models.ClusterSource(kube_config=models.KubeConfig(location="worker-1-secret"))
                    ),
                    status=models.MultiKueueClusterStatus(
                        conditions=[
                            models.Condition(type="Active", status="True", reason="Active", message="Connected")
                        ]
                    ),
                )
            ),
            "",
        ),
        (
            types.MultiKueueConfigObserved(
                config=models.MultiKueueConfig(
                    metadata=models.ObjectMeta(name="multikueue-test"),
                    spec=models.MultiKueueConfigSpec(clusters=["worker-1", "worker-2"]),
                )
            ),
            "",
        ),
        (
            types.RemoteWorkloadObserved(
                workload=ref,
                cluster="worker-1",
                quota_reserved=True,
                admitted=True,
                admitted_at_ms=1_796_198_953_000,
                evicted=True,
                eviction_reason="Preempted",
                finished=True,
                finish_reason="Succeeded",
                finish_message="Job finished successfully",
                at_ms=1_796_198_954_000,
                topology_assigned=["workers"],
            ),
            "",
        ),
        (
            types.WorkerClusterConnectivity(
                cluster="worker-1",
                active=False,
                reason="ClientConnectionFailed",
                message="dial tcp 10.0.0.7:6443: connect: connection refused",
                at_ms=1_796_198_953_000,
            ),
            "",
        ),
        (
            types.WorkersNominated(
                workload=ref,
                check="sample-multikueue",
                clusters=["worker-1", "worker-2"],
                step=1,
                at_ms=1_796_198_953_000,
            ),
            subjects.workload_decision_subject(ref),
        ),
        (
            types.RemoteAdmissionChosen(
                workload=ref,
                check="sample-multikueue",
                cluster="worker-1",
                message='The workload was admitted on "worker-1"',
                at_ms=1_796_198_953_000,
            ),
            subjects.workload_decision_subject(ref),
        ),
        (
            types.MultiKueueCheckRetry(
                workload=ref,
                check="sample-multikueue",
                message="Workload evicted on worker cluster",
                at_ms=1_796_198_953_000,
            ),
            subjects.workload_decision_subject(ref),
        ),
        (
            types.MultiKueueCheckRejected(
                workload=ref,
                check="sample-multikueue",
                message='No multikueue adapter found for owner kind "apps/v1, Kind=Deployment"',
                at_ms=1_796_198_953_000,
            ),
            subjects.workload_decision_subject(ref),
        ),
        (
            types.FactBatch(
                facts=[
                    types.WorkloadFinished(workload=ref, at_ms=1_796_198_953_000),
                    types.WorkloadFinished(
                        workload=types.WorkloadRef(
                            namespace="team-a", name="job-eval-2b9d1", uid="6f5e4d3c-2b1a-4098-8776-5a4b3c2d1e0f"
                        ),
                        succeeded=False,
                        reason="Failed",
                        message="Job has reached the specified backoff limit",
                        at_ms=1_796_198_954_000,
                    ),
                ]
            ),
            subjects.FACT_BATCH_PREFIX + "watcher",
        ),
    ]
    for event, subject in built:
        if not subject:
            subject = subjects.fact_subject(event)  # type: ignore[arg-type]
        headers = {"Kq-Schema": str(types.SCHEMA_VERSION), "Kq-Type": codec.type_name(event)}
        yield subject, codec.encode(event).decode(), headers, "built by scripts/golden_events.py"


def _with_carried(
    messages: Iterator[tuple[str, str, dict[str, str], str]],
) -> Iterator[tuple[str, str, dict[str, str], str]]:
    """``messages``, each DecisionRecord followed by the decisions it carries (schema 17), each as the payload it
    would be as a message of its own on its workload's decision subject (the same bytes: the record holds them)."""
    from kueue_es.events import codec, subjects, types

    for subject, data, headers, source in messages:
        yield subject, data, headers, source
        if headers.get("Kq-Type") != "DecisionRecord":
            continue
        record = codec.decode(data.encode())
        assert isinstance(record, types.DecisionRecord)
        for index, decision in enumerate(record.carried, start=1):
            carried_headers = {"Kq-Schema": headers["Kq-Schema"], "Kq-Type": codec.type_name(decision)}
            where = subjects.workload_decision_subject(decision.workload, record.partition)
            yield where, codec.encode(decision).decode(), carried_headers, f"{source} (decision {index} it carries)"


def choose(*tiers: Iterator[tuple[str, str, dict[str, str], str]]) -> dict[str, dict[str, Any]]:
    """Per ``Kq-Type``, a message of the first tier that has one: the one whose payload has the most
    key paths, then the shortest."""
    best: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
    messages = ((tier, m) for tier, source in enumerate(tiers) for m in source)
    for tier, (subject, data, headers, source) in messages:
        kind = headers["Kq-Type"]
        payload = json.loads(data)
        rank = (tier, -len(key_paths(payload)), len(data))
        if kind not in best or rank < best[kind][0]:
            golden = {
                "headers": {"Kq-Schema": headers["Kq-Schema"], "Kq-Type": kind},
                "subject": subject,
                "source": source,
                "data": payload,
            }
            best[kind] = (rank, golden)
    return {kind: golden for kind, (_, golden) in best.items()}


def write(folder: Path, goldens: dict[str, dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for kind, golden in sorted(goldens.items()):
        (folder / f"{kind}.json").write_text(json.dumps(golden, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="take the payloads of this recorded log (JSONL)")
    args = parser.parse_args(argv)
    if args.log is not None:
        goldens = choose(_with_carried(_log_messages(args.log.resolve())))
        versions = {g["headers"]["Kq-Schema"] for g in goldens.values()}
        if len(versions) != 1:
            raise SystemExit(f"{args.log}: messages of schema versions {sorted(versions)}; one version per folder")
        write(FIXTURES / "events" / f"v{versions.pop()}", goldens)
        return 0
    from kueue_es.events import codec, types

    demo = FIXTURES / "logs" / f"demo-preempt-v{types.SCHEMA_VERSION}.jsonl"
    recorded = _log_messages(demo) if demo.exists() else iter(())  # no demo recorded in this version: scenarios

    goldens = choose(_with_carried(recorded), _with_carried(_scenario_messages()), _built())
    missing = {codec.tag_of(cls) for cls in types.ALL_TYPES} - set(goldens)
    if missing:
        raise SystemExit(f"no payload of {sorted(missing)}: add one to _built()")
    folder = FIXTURES / "events" / f"v{types.SCHEMA_VERSION}"
    write(folder, goldens)
    (folder / "schema.json").write_text(json.dumps(codec.json_schema(), indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
