"""The labels and annotations both Kubernetes edges use: the watcher reads what the dispatcher writes.

Why this module exists: the dispatcher marks the jobs it stops for an eviction and
gates, labels and annotates the pods it starts; the watcher reads those marks back
to report what the jobs do. Naming them once, here, keeps the two edges in step
without either importing the other. Kueue's own labels that only the job
conversion reads (queue name, priority class) are in
:mod:`kueue_es.jobframework.workloads`; the pod group ones in
:mod:`kueue_es.jobframework.pods`.
"""

from __future__ import annotations

EVICTED_ANNOTATION = "kueue-es.dev/evicted"
"""Set on a Job the dispatcher stopped for an eviction; the value is the eviction's reason.

The watcher reads it to tell an eviction from a Job that is merely suspended, and
reports WorkloadStopped once the Job has no active pods; StartJob removes it. It
ties the stopped Job to the eviction on the log: the Workload object's Evicted
condition, which the dispatcher writes too, is not read back for that (Kueue's job
reconciler reads the condition itself).
"""

EVICTION_SEQ_ANNOTATION = "kueue-es.dev/eviction-seq"
"""Set with :data:`EVICTED_ANNOTATION`: the log sequence of the EvictionRequested.

It names the eviction, so the watcher reports each one once (its WorkloadStopped
Msg-Id) however often it sees the stopped Job, and a second eviction of a Job that
is still stopped (evicted again before it was restarted) still changes the Job.
"""

EVICTED_WORKLOAD_ANNOTATION = "kueue-es.dev/evicted-workload"
"""Set with :data:`EVICTED_ANNOTATION` when the eviction is not of the job's own workload but of the
ConcurrentAdmission variant it ran for (its parent, the job's Workload, stands for the job): the variant's name, so
the watcher reports the variant stopped. A variant's start removes it.
"""

RUNNING_VARIANT_ANNOTATION = "kueue-es.dev/running-variant"
"""Set on a job the dispatcher started for a ConcurrentAdmission variant (its parent, the job's Workload, stands for
the job): the variant's name, so the watcher reports the job's PodsReady for that variant too (Kueue's controller
copies the parent's PodsReady onto the admitted variant, and a PodsReady timeout counts for the one holding quota).
"""

DISPATCHER_FIELD_MANAGER = "kueue-es"
"""The field manager of the dispatcher's server-side applies (a Workload's status among them). The watcher reads
it back in ``metadata.managedFields``: an Evicted condition owned by another manager (or by an update, not this
apply) is someone else's eviction, a WorkloadEvictionObserved (Kueue acts on the condition whoever wrote it)."""

SCHEDULING_GATE = "kueue.x-k8s.io/admission"
"""The scheduling gate that holds a managed pod until its workload is admitted (Kueue's pod webhook adds it,
the dispatcher removes it)."""

IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
"""On the Workload of a pod group (Kueue IsGroupWorkloadAnnotationKey): its pods are the group's, not one owner's."""

POD_GROUP_POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
"""The label Kueue's pod webhook copies a pod's index into under TAS (Kueue PodGroupPodIndexLabel); also the
``podIndexLabel`` of a pod's or pod group's Workload pod set (pod_controller.go constructPodSet)."""

PODSET_LABEL = "kueue.x-k8s.io/podset"
"""The pod label naming a started pod's pod set (Kueue constants.PodSetLabel): the dispatcher puts it into each
template it starts and takes it out at the stop (the ungater lists pods by it); the watcher reads it as the
mark of a start not undone yet."""
