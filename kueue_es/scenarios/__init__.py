"""Admission scenarios: YAML files that set up Kueue objects and state Kueue's outcome.

The format is ``shared/scenarios/README.md``. A scenario runs on an *engine*
(:mod:`kueue_es.scenarios.engines`): ``core`` folds the pure decision cores
in-process (:mod:`kueue_es.scenarios.core_engine`), ``bus`` (to come) runs every
service on a real nats-server. Both must give the same :class:`Outcome`.

The pipeline, one module a step:

- :mod:`~kueue_es.scenarios.loading`: file -> frozen :class:`Scenario` (or ScenarioError);
- :mod:`~kueue_es.scenarios.engines`: the Engine protocol and the registry by name;
- :mod:`~kueue_es.scenarios.core_engine`: run a scenario in-process, keeping the event log;
- :mod:`~kueue_es.scenarios.outcome`: the final state -> admitted / pending / preempted / finished;
- :mod:`~kueue_es.scenarios.checking`: expected vs actual -> readable mismatch lines.

``kueue-es scenario check|run`` (:mod:`kueue_es.cli`) is the command line over these.
"""

from kueue_es.scenarios.loading import Scenario, ScenarioError, find_scenario_files, load_scenario
from kueue_es.scenarios.outcome import Outcome

__all__ = ["Outcome", "Scenario", "ScenarioError", "find_scenario_files", "load_scenario"]
