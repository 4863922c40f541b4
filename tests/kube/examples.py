"""Kueue's own example manifests (../shared/kueue-examples), loaded as they are, for the job integration tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml


def _examples() -> Path:
    """``../shared/kueue-examples`` beside the checkout, or beside the main checkout when this one is a git worktree
    (its ``.git`` file names the main one's ``.git/worktrees/NAME``)."""
    root = Path(__file__).resolve().parents[2]
    found = root.parent / "shared" / "kueue-examples"
    marker = root / ".git"
    if not found.exists() and marker.is_file() and marker.read_text().startswith("gitdir: "):
        main = Path(marker.read_text().removeprefix("gitdir: ").strip()).parents[2]
        return main.parent / "shared" / "kueue-examples"
    return found


EXAMPLES = _examples()

#: Example files whose objects Kueue's own webhooks refuse today, each with the field refused and why: a
#: user applying them meets the same refusal from Kueue and from kueue-es.
REFUSED_BY_KUEUE = {
    "admin/minimal-cq.yaml": (
        "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
        "the ClusterQueue has no resource groups, so its check's onFlavors name a flavor it has no quota in "
        "(Kueue PR #10369, clusterqueue_webhook.go validateAdmissionCheckOnFlavors)",
    ),
}


def load(relative: str) -> list[dict[str, Any]]:
    """Every document of one example file, in order."""
    with open(EXAMPLES / relative, encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def cronjob_job(*, uid: str = "", scheduled_minute: int = 29_000_000) -> dict[str, Any]:
    """The Job the CronJob controller creates from Kueue's jobs/sample-cronjob.yaml.

    As kube-controller-manager's cronjob controller does (getJobFromTemplate2): named
    ``<cronjob>-<scheduled time in minutes>``, the jobTemplate's labels and spec, and a
    controller owner reference to the CronJob. ``uid`` is set when given (a server
    gives one on create).
    """
    [cronjob] = load("jobs/sample-cronjob.yaml")
    template = cronjob["spec"]["jobTemplate"]
    meta: dict[str, Any] = {
        "name": f"{cronjob['metadata']['name']}-{scheduled_minute}",
        "namespace": cronjob["metadata"].get("namespace", "default"),
        "labels": dict(template.get("metadata", {}).get("labels", {})),
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": cronjob["metadata"]["name"],
                "uid": "cronjob-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": copy.deepcopy(template["spec"])}
