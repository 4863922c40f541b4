"""The registry of deciders by role, shared by the services and by replay.

Replay looks a DecisionRecord's ``role`` up here and re-runs it only when the
record's ``logic_version`` is the installed one, or one of :data:`EARLIER` (versions
this install still re-runs as they decided). A record made by another logic
version cannot be re-checked by this install; replay reports it as unverifiable, naming
the kueue-es version recorded in it (``pip install kueue-es==<version>`` and replay again).

``CUTS`` are the output cuts a record may claim (``DecisionRecord.max_outputs``):
0 (no cut: the scenario runner and tests) and the services' ``MAX_BATCH``.
"""

from __future__ import annotations

from kueue_es.scheduling import lifecycle
from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.multikueue import core as multikueue_core
from kueue_es.services.preemptor import core as preemptor_core
from kueue_es.services.runtime import MAX_BATCH, Decider
from kueue_es.services.tas_placer import core as placer_core

ADMITTER = Decider(
    role=admitter_core.ROLE,
    logic_version=admitter_core.LOGIC_VERSION,
    decide=admitter_core.decide,
    yields_to=admitter_core.answered_by_others,
    wakes_at=lifecycle.next_timer_ms,
)
PREEMPTOR = Decider(role=preemptor_core.ROLE, logic_version=preemptor_core.LOGIC_VERSION, decide=preemptor_core.decide)
PLACER = Decider(role=placer_core.ROLE, logic_version=placer_core.LOGIC_VERSION, decide=placer_core.decide)
MULTIKUEUE = Decider(
    role=multikueue_core.ROLE, logic_version=multikueue_core.LOGIC_VERSION, decide=multikueue_core.decide
)

BY_ROLE: dict[str, Decider] = {d.role: d for d in (ADMITTER, PREEMPTOR, PLACER, MULTIKUEUE)}

EARLIER: dict[tuple[str, int], Decider] = {
    **{
        (admitter_core.ROLE, version): Decider(
            role=admitter_core.ROLE, logic_version=version, decide=admitter_core.decide_as(version)
        )
        for version in admitter_core.EARLIER_LOGIC_VERSIONS
    },
    **{
        (preemptor_core.ROLE, version): Decider(
            role=preemptor_core.ROLE, logic_version=version, decide=preemptor_core.decide_as(version)
        )
        for version in preemptor_core.EARLIER_LOGIC_VERSIONS
    },
    **{
        (placer_core.ROLE, version): Decider(
            role=placer_core.ROLE, logic_version=version, decide=placer_core.decide_as(version)
        )
        for version in placer_core.EARLIER_LOGIC_VERSIONS
    },
}
"""Earlier logic versions replay still re-runs, by (role, logic version): every one of the admitter's,
the preemptor's and the TAS placer's ``EARLIER_LOGIC_VERSIONS``, whose docstrings say what each decided differently. Among
them the admitter's 9 (pending outcomes written as messages, before they moved into the DecisionRecord,
issue 15), 10 and 11 (before elastic workload slices, issue 21), the preemptor's 5 (both before workloads
giving quota back stopped counting as candidates or TAS usage in the cycle that releases them, issue 18),
and the admitter's 17 and the preemptor's 6 (admission fair sharing's LocalQueue usage ordered the
preemption candidates of the preemptor's own ClusterQueue only), the placer's 6 and 7 (a node replacement counted
only its own flavor's TAS usage; 6 also sized balanced placement's domains in single pods), and the admitter's 24,
the preemptor's 10 and the placer's 8 (the alpha gate TASRespectNodeAffinityPreferred ignored), and the placer's 9
(a node's taints checked against the current tolerations every cycle, not only after the node changed) and
10 (a NotReady or tainted node failed at once, whatever pods of the workload still ran there)."""

CUTS: frozenset[int] = frozenset({0, MAX_BATCH})
