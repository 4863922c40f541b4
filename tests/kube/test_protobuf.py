"""Protobuf request bodies (kueue_es/sim/protobuf.py) as kubectl v1.32.4's generators send them: the bodies
below were captured from ``kubectl create priorityclass ...``, ``kubectl create namespace team-a`` and
``kubectl create job j2 --image=busybox``."""

from __future__ import annotations

import pytest

from kueue_es.sim import protobuf

#: kubectl create priorityclass low --value=-5 --global-default --description="batch jobs" --preemption-policy=Never
LOW = bytes.fromhex(
    "6b3873000a250a147363686564756c696e672e6b38732e696f2f7631120d5072696f72697479436c61737312350a130a036c6f7712"
    "001a0022002a0032003800420010fbffffffffffffffff011801220a6261746368206a6f62732a054e657665721a002200"
)
#: kubectl create priorityclass zero --value=0
ZERO = bytes.fromhex(
    "6b3873000a250a147363686564756c696e672e6b38732e696f2f7631120d5072696f72697479436c61737312320a140a047a65726f"
    "12001a0022002a003200380042001000180022002a14507265656d70744c6f7765725072696f726974791a002200"
)
#: kubectl create namespace team-a
TEAM_A = bytes.fromhex(
    "6b3873000a0f0a02763112094e616d657370616365121e0a160a067465616d2d6112001a0022002a0032003800420012001a020a001a002200"
)
#: kubectl create job j2 --image=busybox
JOB = bytes.fromhex(
    "6b3873000a0f0a0862617463682f763112034a6f62127a0a120a026a3212001a0022002a00320038004200125a32580a100a001200"
    "1a0022002a00320038004200124412210a026a32120762757379626f782a0042006a007200800100880100900100a201001a054e65"
    "766572320042004a0052005800600068008201008a01009a0100c201001a082000280030003a001a002200"
)


def test_priority_classes_decode_as_the_json_kubectl_would_send() -> None:
    """Every field of a PriorityClass, a negative value (a 10-byte varint) among them; Go's empty fields are
    left out as its JSON encoder leaves them, but ``value: 0`` stays."""
    assert protobuf.decode(LOW, api_version="scheduling.k8s.io/v1", kind="PriorityClass") == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "low"},
        "value": -5,
        "globalDefault": True,
        "description": "batch jobs",
        "preemptionPolicy": "Never",
    }
    assert protobuf.decode(ZERO, api_version="scheduling.k8s.io/v1", kind="PriorityClass") == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "zero"},
        "value": 0,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def test_a_namespace_decodes_to_its_name() -> None:
    """kubectl create namespace: only the name (the empty spec and status go)."""
    assert protobuf.decode(TEAM_A, api_version="v1", kind="Namespace") == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a"},
    }


#: A body naming a kind no table here has (v1 Pod), with an empty object.
POD = protobuf.MAGIC + bytes.fromhex("0a090a0276311203506f64")


def test_a_job_decodes_through_the_tables_generated_from_kubernetes_protos() -> None:
    """kubectl create job (and create cronjob, create deployment) send their objects as protobuf: read through
    the field numbers scripts/protobuf_messages.py took from Kubernetes' generated.proto files (they were 415)."""
    assert protobuf.decode(JOB, api_version="batch/v1", kind="Job") == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j2"},
        "spec": {"template": {"spec": {"containers": [{"name": "j2", "image": "busybox"}], "restartPolicy": "Never"}}},
    }
    assert {("batch/v1", "CronJob"), ("apps/v1", "Deployment")} <= set(protobuf.MESSAGES)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        pytest.param(POD, "only for .*PriorityClass", id="a kind without a schema here"),
        pytest.param(b'{"kind": "Job"}', "k8s", id="JSON sent as protobuf"),
        pytest.param(LOW[:-9], "runs past the end", id="a truncated body"),
    ],
)
def test_what_cannot_be_read_is_refused_saying_why(body: bytes, want: str) -> None:
    """The emulator answers these 415 with the message (kubectl prints it)."""
    with pytest.raises(protobuf.Unsupported, match=want):
        protobuf.decode(body, api_version="batch/v1", kind="Job")
