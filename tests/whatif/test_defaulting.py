"""``kueue-es diff`` compares objects after the same defaulting (found by a new user's trial).

The watcher records a ClusterQueue as the API server defaulted it (``flavorFungibility``, ``preemption``
and ``queueingStrategy`` filled in from the CRD's defaults); a what-if CHANGES file's ClusterQueue was
taken as written. ``kueue-es diff RECORDED WHAT-IF.log`` then listed ``spec.flavorFungibility: {} ->
"<missing>"`` and ``spec.preemption: {"borrowWithinCohort": {}} -> "<missing>"`` among the reasons, though
nothing but the quota had changed. The CHANGES object is now defaulted as the API server defaults it, and
diff compares objects after their CRDs' defaults either way.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es import cli, crds, logfile
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.watcher.convert import kueue_fact
from kueue_es.sim import custom_resources
from kueue_es.whatif import changes, diff

FIXTURE = Path(__file__).parent / "history.yaml"
CQ = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - {{name: default-flavor, resources: [{{name: cpu, nominalQuota: {cpu}}}]}}
"""


def _as_the_api_server_stores(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` defaulted as the emulated API server defaults a custom resource on a write (its CRD's schema)."""
    out = copy.deepcopy(doc)
    kind = next(k for k in crds.KINDS if k.kind == doc["kind"])
    custom_resources.apply_defaults(out, crds.object_schema(kind))
    return out


def _recorded_cq(cpu: int) -> types.Fact:
    """The ClusterQueueObserved the watcher records for the CQ above."""
    return kueue_fact(_as_the_api_server_stores(yaml.safe_load(CQ.format(cpu=cpu))))


def test_a_changes_object_is_the_fact_the_watcher_would_record() -> None:
    parsed = changes.parse(CQ.format(cpu=8)).objects[("ClusterQueue", "", "cq")]
    recorded = _recorded_cq(8)
    assert codec.encode(parsed) == codec.encode(recorded)
    assert isinstance(parsed, types.ClusterQueueObserved) and parsed.cluster_queue.spec.flavor_fungibility is not None


def _state(fact: types.Fact) -> ClusterState:
    state = ClusterState()
    apply(state, fact, seq=1)
    return state


def test_object_differences_leave_out_what_defaulting_fills_in() -> None:
    as_written = types.ClusterQueueObserved(cluster_queue=kueue_fact(yaml.safe_load(CQ.format(cpu=8))).cluster_queue)  # type: ignore[union-attr]
    assert codec.encode(as_written) != codec.encode(_recorded_cq(8))  # the premise: they encode apart
    assert diff.object_differences(_state(_recorded_cq(8)), _state(as_written)) == []
    assert diff.object_differences(_state(_recorded_cq(4)), _state(as_written)) == [
        "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: 4000 -> 8000"
    ]


@pytest.fixture(scope="module")
def recorded_defaulted() -> list[LogMessage]:
    """tests/whatif/history.yaml recorded with its ClusterQueue as the watcher records one: defaulted."""
    messages = run_scenario(load_scenario(FIXTURE)).messages
    out = []
    for message in messages:
        event = codec.decode(message.data)
        if isinstance(event, types.ClusterQueueObserved):
            doc = yaml.safe_load(CQ.format(cpu=4))
            doc["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
            fact = kueue_fact(_as_the_api_server_stores(doc))
            data = subjects.fact_message(fact).data
            message = LogMessage(seq=message.seq, subject=message.subject, data=data, headers=message.headers)
        out.append(message)
    return out


def test_diff_of_a_what_if_shows_the_changed_quota_not_defaults(
    recorded_defaulted: list[LogMessage], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "recorded.log"
    logfile.write_lines(log, recorded_defaulted)
    path = tmp_path / "changes.yaml"
    path.write_text(
        CQ.format(cpu=12).replace(
            "namespaceSelector: {}", "namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority}"
        )
    )
    changed = tmp_path / "changed.log"
    assert cli.main(["what-if", "-f", str(path), "--file", str(log), "--write-log", str(changed)]) == 0
    capsys.readouterr()
    assert cli.main(["diff", str(log), str(changed)]) == 1
    out = capsys.readouterr().out
    assert "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: 4000 -> 12000" in out
    assert "flavorFungibility" not in out and "borrowWithinCohort" not in out and "<missing>" not in out
