"""Events round-trip through the codec byte for byte, and the schema export covers them."""

import hashlib
import json
import subprocess
import sys
import typing

import pytest

from kueue_es.events import codec, models, subjects, types

REF = types.WorkloadRef(namespace="default", name="job-a", uid="u1")
SAMPLES: list[types.Event] = [
    types.ResourceFlavorObserved(flavor=models.ResourceFlavor(metadata=models.ObjectMeta(name="f"))),
    types.WorkloadObserved(
        workload=models.Workload(
            metadata=models.ObjectMeta(name="w", namespace="ns", creation_timestamp_ms=5),
            spec=models.WorkloadSpec(pod_sets=[models.PodSet(count=3, requests={"memory": 2**30, "cpu": 500})]),
        )
    ),
    types.ClusterQueueObserved(cluster_queue=models.ClusterQueue(metadata=models.ObjectMeta(name="cq"))),
    types.CohortObserved(cohort=models.Cohort(metadata=models.ObjectMeta(name="c"))),
    types.LocalQueueObserved(
        local_queue=models.LocalQueue(
            metadata=models.ObjectMeta(name="lq", namespace="ns"), spec=models.LocalQueueSpec(cluster_queue="cq")
        )
    ),
    types.WorkloadPriorityClassObserved(
        priority_class=models.WorkloadPriorityClass(metadata=models.ObjectMeta(name="high"), value=1000)
    ),
    types.NamespaceObserved(namespace=models.Namespace(metadata=models.ObjectMeta(name="ns", labels={"team": "a"}))),
    types.ConfigurationObserved(configuration=models.Configuration(fair_sharing=models.FairSharingConfig())),
    types.SchedulingRequested(request_id="r1", mode="settle"),
    types.AdmissionCheckObserved(admission_check=models.AdmissionCheck(metadata=models.ObjectMeta(name="prov"))),
    types.ObjectDeleted(kind="ClusterQueue", name="cq"),
    types.WorkloadFinished(workload=REF, at_ms=7),
    types.FactBatch(
        facts=[types.WorkloadFinished(workload=REF, at_ms=7), types.WorkloadFinished(workload=REF, at_ms=8)]
    ),
    types.ObjectRejected(kind="Job", namespace="ns", name="j", field="spec.parallelism", problem="bad"),
    types.ChildJobObserved(
        api_version="batch/v1",
        kind="Job",
        namespace="ns",
        name="child",
        uid="u-child",
        ancestor=models.OwnerReference(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js", uid="u-js"),
        at_ms=1,
    ),
    types.DecisionRecord(
        decision_id="admit:p0:3",
        partition="p0",
        role="admit",
        basis_seq=3,
        expected_head_seq=0,
        now_ms=9,
        logic_version=1,
        output_count=1,
        outputs_sha256="00",
    ),
    types.QuotaReserved(
        workload=REF,
        cluster_queue="cq",
        at_ms=1,
        pod_set_assignments=[
            types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 3000}, count=3)
        ],
    ),
    types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=1),
    types.WorkloadInadmissible(workload=REF, reason="Pending", message="m", at_ms=1),
    types.QuotaReleased(workload=REF, cluster_queue="cq", reason="Finished", cause_seq=4, at_ms=2),
    types.WorkloadStopped(workload=REF, reason="Preempted", at_ms=9),
    types.WorkloadEvictionObserved(workload=REF, reason="Preempted", message="By test", at_ms=9),
    types.PreemptionRequired(
        workload=REF,
        cluster_queue="cq",
        pod_set_assignments=[
            types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 2000}, count=2)
        ],
        targets=[types.PreemptionTarget(workload=REF, cluster_queue="cq", reason="InClusterQueue")],
        message="Pending the preemption of 1 workload(s)",
        at_ms=3,
    ),
    types.PreemptionIssued(
        workload=REF,
        cluster_queue="cq",
        nomination_seq=12,
        targets=[types.PreemptionTarget(workload=REF, cluster_queue="other", reason="InCohortReclamation")],
        at_ms=3,
    ),
    types.EvictionRequested(
        workload=REF,
        cluster_queue="cq",
        preemptor=REF,
        preemption_reason="InClusterQueue",
        message="Preempted to accommodate a workload",
        at_ms=3,
    ),
    types.EvictionRequested(
        workload=REF,
        cluster_queue="cq",
        reason="PodsReadyTimeout",
        message="Exceeded the PodsReady timeout ns/w",
        at_ms=4,
        requeue_at_ms=60_004,
        requeue_count=1,
    ),
    types.WorkloadDeactivated(workload=REF, reason="AdmissionCheck", message="check rejected", at_ms=5),
    types.AdmissionCheckStateChanged(
        workload=REF,
        check="prov",
        state="Ready",
        pod_set_updates=[models.PodSetUpdate(name="main", node_selector={"pool": "a"})],
        at_ms=6,
    ),
    types.WorkloadPodsReady(workload=REF, ready=True, reason="Started", at_ms=7),
    types.WorkloadReclaimablePods(workload=REF, reclaimable_pods=[types.ReclaimablePod(name="main", count=2)], at_ms=7),
    types.WorkloadRequeued(workload=REF, at_ms=8),
    types.TopologyObserved(
        topology=models.Topology(
            metadata=models.ObjectMeta(name="default"),
            spec=models.TopologySpec(
                levels=[
                    models.TopologyLevel(node_label="rack"),
                    models.TopologyLevel(node_label="kubernetes.io/hostname"),
                ]
            ),
        )
    ),
    types.NodeObserved(
        node=models.Node(
            metadata=models.ObjectMeta(name="n1", labels={"rack": "r1", "kubernetes.io/hostname": "n1"}),
            spec=models.NodeSpec(taints=[models.Taint(key="k", value="v", effect="NoSchedule")]),
            status=models.NodeStatus(allocatable={"cpu": 8000, "pods": 110}, ready="True"),
        )
    ),
    types.PodObserved(
        pod=models.PodUsage(namespace="kube-system", name="ds-1", node_name="n1", phase="Running", requests={"pods": 1})
    ),
    types.DeviceClassObserved(
        device_class=models.DeviceClass(
            metadata=models.ObjectMeta(name="gpu.example.com", creation_timestamp_ms=5),
            extended_resource_name="example.com/gpu",
            selectors=['device.driver == "gpu.example.com"'],
        )
    ),
    types.ResourceClaimTemplateObserved(
        resource_claim_template=models.ResourceClaimTemplate(
            metadata=models.ObjectMeta(name="gpus", namespace="default"),
            requests=[
                models.DeviceRequest(
                    name="gpu", exactly=models.ExactDeviceRequest(device_class_name="gpu.example.com", count=2)
                ),
                models.DeviceRequest(name="any", first_available=2),
            ],
        )
    ),
    types.ResourceSliceObserved(
        resource_slice=models.ResourceSlice(
            metadata=models.ObjectMeta(name="node-1-gpus"),
            driver="gpu.example.com",
            pool="node-1",
            devices=[
                models.SliceDevice(
                    name="gpu-0",
                    attributes={"model": models.DeviceAttribute(string_value="a100")},
                    capacity={"memory": "80Gi"},
                )
            ],
        )
    ),
    types.TopologyAssigned(
        workload=REF,
        cluster_queue="cq",
        assignments={
            "main": models.TopologyAssignment(
                levels=["kubernetes.io/hostname"],
                slices=[
                    models.TopologyAssignmentSlice(
                        domain_count=2,
                        values_per_level=[
                            models.TopologyAssignmentLevelValues(
                                individual=models.TopologyAssignmentIndividualValues(prefix="n", roots=["1", "2"])
                            )
                        ],
                        pod_counts=models.TopologyAssignmentPodCounts(universal=3),
                    )
                ],
            )
        },
        at_ms=9,
    ),
    types.MultiKueueClusterObserved(
        cluster=models.MultiKueueCluster(
            metadata=models.ObjectMeta(name="w1"),
            spec=models.MultiKueueClusterSpec(
                cluster_source=models.ClusterSource(kube_config=models.KubeConfig(location="w1-secret"))
            ),
            status=models.MultiKueueClusterStatus(conditions=[models.Condition(type="Active", status="True")]),
        )
    ),
    types.MultiKueueConfigObserved(
        config=models.MultiKueueConfig(
            metadata=models.ObjectMeta(name="mk"), spec=models.MultiKueueConfigSpec(clusters=["w1", "w2"])
        )
    ),
    types.RemoteWorkloadObserved(workload=REF, cluster="w1", quota_reserved=True, admitted=True, admitted_at_ms=5),
    types.WorkerClusterConnectivity(cluster="w1", active=False, reason="ClientConnectionFailed", at_ms=6),
    types.WorkersNominated(workload=REF, check="mk", clusters=["w1", "w2"], step=0, at_ms=7),
    types.RemoteAdmissionChosen(workload=REF, check="mk", cluster="w1", message='admitted on "w1"', at_ms=8),
    types.MultiKueueCheckRetry(workload=REF, check="mk", message="Workload evicted on worker cluster", at_ms=9),
    types.MultiKueueCheckRejected(workload=REF, check="mk", message="no adapter", at_ms=9),
    types.DispatchApplied(workload=REF, decision_seq=8, action="StartJob"),
    types.DispatchFailed(workload=REF, decision_seq=8, action="StartJob", status=404, reason="NotFound"),
    types.DispatchBatchApplied(
        partition="p0",
        record_seq=7,
        entries=[types.DispatchEntry(decision_seq=8, workload=REF, action="StartJob", target="Job ns/j")],
    ),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_round_trip_is_exact(event: types.Event) -> None:
    """decode(encode(e)) == e and re-encoding gives the same bytes, with the type tag first."""
    data = codec.encode(event)
    assert codec.decode(data) == event
    assert codec.encode(codec.decode(data)) == data
    assert json.loads(data)["type"] == type(event).__name__


def test_encoding_sorts_map_keys() -> None:
    """Dict insertion order never changes the bytes (replay compares bytes)."""
    a = types.DispatchApplied(workload=REF, decision_seq=1, action="x", node_selector={"b": "1", "a": "2"})
    b = types.DispatchApplied(workload=REF, decision_seq=1, action="x", node_selector={"a": "2", "b": "1"})
    assert codec.encode(a) == codec.encode(b)


def test_every_event_type_has_a_sample_and_is_in_the_schema() -> None:
    """The schema export names every event type; the samples above cover them all."""
    schema = codec.json_schema()
    names = set(schema["$defs"])
    for cls in types.ALL_TYPES:
        assert cls.__name__ in names
    assert {type(e) for e in SAMPLES} == set(types.ALL_TYPES)


@pytest.mark.parametrize("data", [b"", b"{}", b'{"type":"Nope"}', b"\xff", b'{"type":"WorkloadFinished"}'])
def test_garbage_is_a_decode_error(data: bytes) -> None:
    """Bytes that are not an event raise DecodeError with a reason."""
    with pytest.raises(codec.DecodeError, match="not a kueue-es event"):
        codec.decode(data)


def test_subjects_escape_dots() -> None:
    """Names with dots stay one subject token."""
    fact = types.ObjectDeleted(kind="ResourceFlavor", name="gpu.a100")
    assert subjects.fact_subject(fact) == "kq.in.rf._.gpu%2Ea100"
    assert subjects.workload_decision_subject(REF) == "kq.dec.p0.wl.default.job-a"


def test_schema_command_prints_json() -> None:
    """`kueue-es events schema` prints the JSON Schema."""
    out = subprocess.run([sys.executable, "-m", "kueue_es.cli", "events", "schema"], capture_output=True, check=True)
    schema = json.loads(out.stdout)
    assert "QuotaReserved" in schema["$defs"]


def test_a_batch_result_stands_for_the_dispatch_applied_of_each_entry() -> None:
    other = types.WorkloadRef(namespace="ns", name="other")
    batch = types.DispatchBatchApplied(
        partition="p0",
        record_seq=7,
        entries=[
            types.DispatchEntry(decision_seq=8, workload=REF, action="StartJob", node_selector={"a": "1"}),
            types.DispatchEntry(decision_seq=9, workload=other, action="Evict", target="Job ns/other"),
        ],
    )
    assert types.dispatch_results(batch) == [
        types.DispatchApplied(workload=REF, decision_seq=8, action="StartJob", node_selector={"a": "1"}),
        types.DispatchApplied(workload=other, decision_seq=9, action="Evict", target="Job ns/other"),
    ]
    single = types.DispatchFailed(workload=REF, decision_seq=8, action="StartJob", status=404, reason="NotFound")
    assert types.dispatch_results(single) == (single,)
    assert types.dispatch_results(types.ObjectDeleted(kind="Workload", namespace="ns", name="w")) == ()


FACT_SAMPLES = [e for e in SAMPLES if isinstance(e, typing.get_args(types.Fact))]


@pytest.mark.parametrize("fact", FACT_SAMPLES, ids=lambda e: type(e).__name__)
def test_a_fact_message_is_encoded_once(fact: types.Fact, monkeypatch: pytest.MonkeyPatch) -> None:
    """fact_message encodes its fact once (the bench harness makes one per workload created, finished
    or stopped: issue 18) and makes the message of the subject, dedup id and headers it always made."""
    kind, namespace, name = subjects.fact_identity(fact)
    expected = subjects.message(
        fact, subject=subjects.fact_subject(fact), msg_id=f"{codec.type_name(fact)}:{kind}:{namespace}/{name}:v7"
    )
    encode = codec.encode
    calls: list[types.Event] = []

    def counted(event: types.Event) -> bytes:
        calls.append(event)
        return encode(event)

    monkeypatch.setattr(codec, "encode", counted)
    assert subjects.fact_message(fact, version="v7") == expected
    assert calls == [fact]
    digest = subjects.fact_message(fact)
    assert digest.msg_id.endswith(":" + hashlib.sha256(expected.data).hexdigest()[:24])
