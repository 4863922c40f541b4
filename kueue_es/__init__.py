"""kueue-es: Kueue's job queueing and admission for Kubernetes, event-sourced on NATS JetStream.

Why this package exists: it is the one import name the distribution installs.
The repository's top-level folders are mapped under it (setup.py):
``kueue_es.events`` (events/), ``kueue_es.projections`` (projections/),
``kueue_es.scheduling`` (scheduling/), ``kueue_es.jobframework``
(jobframework/) and ``kueue_es.services`` (services/). This folder itself holds
the command line and the tools around the services: ``cli``, ``supervisor``
(``kueue-es up``), ``demo``, ``replay``, ``timeline``, ``crds``, the benches
(``bench``, ``perfbench``), the scenario runner (``scenarios``) and the
simulated cluster (``sim``). docs/design.md has the whole tree.
"""

__version__ = "0.1.0"
