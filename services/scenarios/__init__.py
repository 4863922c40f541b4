"""Admission scenarios: YAML files that set up Kueue objects and state Kueue's outcome.

The format is ``shared/scenarios/README.md``. A scenario runs on an *engine*
(:mod:`services.scenarios.engines`): ``core`` folds the pure decision cores
in-process (:mod:`services.scenarios.core_engine`), ``bus`` (to come) runs every
service on a real nats-server. Both must give the same :class:`Outcome`.

The pipeline, one module a step:

- :mod:`~services.scenarios.loading`: file -> frozen :class:`Scenario` (or ScenarioError);
- :mod:`~services.scenarios.engines`: the Engine protocol and the registry by name;
- :mod:`~services.scenarios.core_engine`: run a scenario in-process, keeping the event log;
- :mod:`~services.scenarios.outcome`: the final state -> admitted / pending / preempted / finished;
- :mod:`~services.scenarios.checking`: expected vs actual -> readable mismatch lines.

``kueue-es scenario check|run`` (:mod:`services.cli`) is the command line over these.
"""

from services.scenarios.loading import Scenario, ScenarioError, find_scenario_files, load_scenario
from services.scenarios.outcome import Outcome

__all__ = ["Outcome", "Scenario", "ScenarioError", "find_scenario_files", "load_scenario"]
