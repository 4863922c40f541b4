"""deploy/cohosted-deciders: deploy/base with the three deciders in one Deployment (``service deciders``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def build(directory: str) -> list[dict[str, Any]]:
    text = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / directory)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_cohosted_overlay_runs_the_three_deciders_in_one_deployment_as_their_own_users() -> None:
    base, cohosted = build("base"), build("cohosted-deciders")
    names = {(d["kind"], d["metadata"]["name"]) for d in cohosted}
    gone = {
        (k, f"kueue-es-{n}")
        for k in ("Deployment", "PodDisruptionBudget", "ServiceAccount")
        for n in ("preemptor", "tas-placer")
    }
    assert not names & gone
    assert {(d["kind"], d["metadata"]["name"]) for d in base} - gone == names
    (deployment,) = [d for d in cohosted if d["kind"] == "Deployment" and d["metadata"]["name"] == "kueue-es-admitter"]
    kubernetes_validate.validate(deployment, "1.36", strict=True)
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["args"][:2] == ["service", "deciders"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "KUEUE_ES_NATS_USER" not in env and "KUEUE_ES_NATS_PASSWORD_FILE" not in env
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "nats")
    assert env["KUEUE_ES_NATS_PASSWORD_DIR"] == mount
    (nats,) = [v for v in spec["volumes"] if v["name"] == "nats"]
    items = nats["projected"]["sources"][0]["secret"]["items"]
    assert {(i["key"], i["path"]) for i in items} == {
        (u, f"{u}.password") for u in ("admitter", "preemptor", "tas-placer")
    }
