"""A log folded by both the admitter's state and a dispatcher's view, for the dispatcher's pure tests."""

from __future__ import annotations

import msgspec

from kueue_es.events import models, types
from kueue_es.services.dispatcher import core
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload


def job_workload(
    name: str, *, priority: int | None = None, owner_kind: str = "Job", active: bool = True, cpu: str = "2"
) -> types.WorkloadObserved:
    """The WorkloadObserved of a ``owner_kind``'s workload ``name`` (one pod set ``main``, ``cpu`` CPUs), in lq."""
    made = parse(workload(name, priority=priority, cpu=cpu))
    owner = models.OwnerReference(api_version="batch/v1", kind=owner_kind, name=name, uid=f"uid-{name}")
    spec = msgspec.structs.replace(made.spec, active=active)
    return types.WorkloadObserved(workload=msgspec.structs.replace(made, owner=owner, spec=spec))


class DispatchLog:
    """A :class:`tests.builders.Log` whose every event the dispatcher's ``view`` folds too, at the same sequence."""

    def __init__(self, *, cq_name: str = "cq", cpu: str = "2", gates: dict[str, bool] | None = None) -> None:
        self.log, self.view = Log(), core.DispatchState()
        if gates is not None:
            self.add(types.ConfigurationObserved(configuration=models.Configuration(feature_gates=gates)))
        self.add(
            types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
            types.ClusterQueueObserved(cluster_queue=parse(cluster_queue(cq_name, flavors={"rf": {"cpu": cpu}}))),
            types.LocalQueueObserved(local_queue=parse(local_queue("lq", cq_name))),
        )

    @property
    def seq(self) -> int:
        """The last sequence folded."""
        return len(self.log.events)

    def add(self, *events: types.Event) -> None:
        for event in events:
            self.log.add(event)
            core.fold(self.view, event, seq=self.seq)

    def admit(self, now_ms: int) -> types.WorkloadAdmitted:
        """One admitter cycle at ``now_ms`` that admits one workload (folded by the state); the view folds that
        admission."""
        [admission] = [d for d in self.log.cycle(now_ms) if isinstance(d, types.WorkloadAdmitted)]
        core.fold(self.view, admission, seq=self.seq)
        return admission
