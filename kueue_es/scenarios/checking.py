"""Expected against actual: a scenario's ``expect`` compared with a run's :class:`Outcome`.

The rules of shared/scenarios/README.md:

- ``admitted`` and ``pending`` assert only the workloads they name; a workload
  named in no list is not checked;
- an ``admitted`` entry may leave out keys (``clusterQueue``, ``podSets``, and in
  a pod set ``flavors``, ``count``, ``topology``); a listed key must match exactly
  (a ``flavors`` mapping names every resource's flavor);
- ``preempted`` is the exact set: the workloads preempted during the run must be
  the ones listed, so ``preempted: []`` means none was (absent: not checked).

Each mismatch is one readable line, prefixed by the workload:
``default/job-2: expected admitted to cluster-queue with podSets.main.count 3, got pending``,
``default/w2: podSets.main.flavors.cpu: expected spot, got on-demand``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.scenarios.outcome import AdmittedOutcome, Outcome
from kueue_es.scenarios.specs import AdmittedExpectation, Expect, PodSetExpectation


def check(*, expect: Expect, outcome: Outcome) -> list[str]:
    """Every mismatch between ``expect`` and ``outcome`` as a line; empty when they agree."""
    lines: list[str] = []
    for key, want in expect.admitted.items():
        lines.extend(_check_admitted(key, want=want, outcome=outcome))
    for key in expect.reserved or ():
        if key not in outcome.reserved:
            lines.append(f"{key}: expected quota reserved waiting for admission checks, got {outcome.status(key)}")
    for key in expect.pending or ():
        if key not in outcome.pending:
            lines.append(f"{key}: expected pending, got {outcome.status(key)}")
    for key, mk in expect.multikueue.items():
        cluster, nominated = outcome.multikueue.get(key, ("", ()))
        if mk.cluster_name is not None and mk.cluster_name != cluster:
            lines.append(f"{key}: clusterName: expected {mk.cluster_name!r}, got {cluster!r}")
        if mk.nominated is not None and list(mk.nominated) != list(nominated):
            lines.append(f"{key}: nominatedClusterNames: expected {mk.nominated}, got {list(nominated)}")
    if expect.preempted is not None:
        wanted, actual = set(expect.preempted), set(outcome.preempted)
        lines.extend(f"{key}: expected preempted, got not preempted" for key in sorted(wanted - actual))
        lines.extend(f"{key}: expected not preempted, got preempted" for key in sorted(actual - wanted))
    return lines


def _check_admitted(key: str, *, want: AdmittedExpectation, outcome: Outcome) -> list[str]:
    got = outcome.admitted.get(key)
    if got is None:
        return [f"{key}: {describe_admitted(want)}, got {outcome.status(key)}"]
    lines = []
    if want.cluster_queue is not None and want.cluster_queue != got.cluster_queue:
        lines.append(f"{key}: clusterQueue: expected {want.cluster_queue}, got {got.cluster_queue}")
    for name, want_ps in (want.pod_sets or {}).items():
        lines.extend(f"{key}: {line}" for line in _check_pod_set(name, want=want_ps, got=got))
    return lines


def _check_pod_set(name: str, *, want: PodSetExpectation, got: AdmittedOutcome) -> list[str]:
    actual = got.pod_sets.get(name)
    where = f"podSets.{name}"
    if actual is None:
        return [f"{where}: expected admitted, got no such pod set (admitted: {', '.join(got.pod_sets) or 'none'})"]
    lines = []
    if want.flavors is not None:
        for resource in sorted({*want.flavors, *actual.flavors}):
            expected, found = want.flavors.get(resource), actual.flavors.get(resource)
            if expected != found:
                lines.append(
                    f"{where}.flavors.{resource}: expected {expected or 'no flavor'}, got {found or 'no flavor'}"
                )
    if want.count is not None and want.count != actual.count:
        lines.append(f"{where}.count: expected {want.count}, got {actual.count}")
    if want.topology is not None and dict(want.topology) != dict(actual.topology or {}):
        # No assignment at all (a pod set not asking for TAS, or one whose topology was delayed or
        # never placed) reads differently from an assignment to other nodes.
        found = (
            _mapping(actual.topology)
            if actual.topology is not None
            else f"no topology assignment (admitted on flavors {_mapping(actual.flavors)})"
        )
        lines.append(f"{where}.topology: expected {_mapping(want.topology)}, got {found}")
    return lines


def describe_admitted(want: AdmittedExpectation) -> str:
    """``expected admitted to cq with podSets.main.count 3, ...``: an admitted expectation in words."""
    text = "expected admitted"
    if want.cluster_queue is not None:
        text += f" to {want.cluster_queue}"
    details = []
    for name, ps in (want.pod_sets or {}).items():
        details += [f"podSets.{name}.flavors.{res} {flavor}" for res, flavor in (ps.flavors or {}).items()]
        if ps.count is not None:
            details.append(f"podSets.{name}.count {ps.count}")
        if ps.topology is not None:
            details.append(f"podSets.{name}.topology {_mapping(ps.topology)}")
    return f"{text} with {', '.join(details)}" if details else text


def _mapping(value: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(value.items())) + "}"
