"""The registry of deciders by role, shared by the services and by replay.

Replay looks a DecisionRecord's ``role`` and ``logic_version`` up here, so an
old decision is always re-checked with the logic that made it.
"""

from __future__ import annotations

from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.preemptor import core as preemptor_core
from kueue_es.services.runtime import Decider
from kueue_es.services.tas_placer import core as placer_core

ADMITTER = Decider(role=admitter_core.ROLE, logic_version=admitter_core.LOGIC_VERSION, decide=admitter_core.decide)
PREEMPTOR = Decider(role=preemptor_core.ROLE, logic_version=preemptor_core.LOGIC_VERSION, decide=preemptor_core.decide)
PLACER = Decider(role=placer_core.ROLE, logic_version=placer_core.LOGIC_VERSION, decide=placer_core.decide)

BY_ROLE: dict[str, Decider] = {d.role: d for d in (ADMITTER, PREEMPTOR, PLACER)}
