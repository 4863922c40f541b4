"""The CHANGES file of ``kueue-es what-if``: Kueue manifests and per-workload priority overrides.

A YAML stream of documents, each one of:

- a ``kueue.x-k8s.io/v1beta2`` ClusterQueue, Cohort, ResourceFlavor, LocalQueue or
  WorkloadPriorityClass: it replaces the recorded object of the same kind and name
  (namespace/name for a LocalQueue) wherever the history observes it (its recorded
  uid and creation time are kept); one the history never has is created at the start
  (or at ``--from``);
- a ``config.kueue.x-k8s.io`` Configuration (Kueue's manager configuration file, v1beta2 or
  v1beta1): it replaces every recorded Configuration, or is in force from the start;
- priority overrides (kueue-es's own kind)::

      apiVersion: whatif.kueue-es.io/v1
      kind: WorkloadPriorities
      priorities:
        default/sample-job-x7k2p: 1000     # a Workload, or the Job it was made for: namespace/name
        default/job-sample-job-4n2fb-e3a3b: 0

  each named workload gets ``spec.priority`` = the value (its priorityClassRef dropped) every
  time the history observes it.

Everything is validated before the history is read: a manifest as ``kueue-es apply`` would
(the CRD schema, Kueue's webhook rules), so a bad file is a :class:`ChangesError` naming the
file, the object and the field. A manifest is then defaulted as the API server defaults it
(:func:`kueue_es.validation.defaulted`), so its fact is the one the watcher would record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kueue_es import validation
from kueue_es.events import codec, manager_config, manifests, models, subjects, types
from kueue_es.events.bus.base import LogMessage

OVERRIDES_API = "whatif.kueue-es.io/v1"
OVERRIDES_KIND = "WorkloadPriorities"
REPLACEABLE = ("ClusterQueue", "Cohort", "ResourceFlavor", "LocalQueue", "WorkloadPriorityClass")


class ChangesError(ValueError):
    """A CHANGES file that cannot be used; the message names the file, the object and the field."""


@dataclass(kw_only=True)
class Changes:
    """What a CHANGES file says: ``objects`` by (kind, namespace, name) as the facts that observe
    them; ``configuration`` (None: unchanged); ``priorities`` by ``namespace/name`` (a Workload's
    or its Job's)."""

    source: str = ""
    objects: dict[tuple[str, str, str], types.Fact] = field(default_factory=dict)
    configuration: models.Configuration | None = None
    priorities: dict[str, int] = field(default_factory=dict)

    def describe(self) -> list[str]:
        """One line per change, for the report: ``ClusterQueue cluster-queue``, ``priority of ns/x: 5``."""
        lines = [f"{kind} {f'{ns}/' if ns else ''}{name}" for kind, ns, name in self.objects]
        if self.configuration is not None:
            lines.append("Configuration")
        lines.extend(f"priority of {key}: {value}" for key, value in self.priorities.items())
        return lines

    def replacement(self, fact: types.Fact) -> types.Fact | None:
        """The changed fact standing for recorded ``fact``, or None when the change names nothing of it.
        The recorded object's metadata (uid, creation time, generation) is kept."""
        if isinstance(fact, types.ConfigurationObserved):
            if self.configuration is None:
                return None
            return types.ConfigurationObserved(configuration=self.configuration)
        identity = identity_of(fact)
        if identity is None or identity not in self.objects:
            return None
        return with_metadata(self.objects[identity], fact)


#: The log's type tags (``Kq-Type``) of the facts :func:`identity_of` names.
_OBSERVED_TAGS = frozenset(
    {
        "ClusterQueueObserved",
        "CohortObserved",
        "ResourceFlavorObserved",
        "LocalQueueObserved",
        "WorkloadPriorityClassObserved",
    }
)


def not_recorded(changes: Changes, messages: Iterable[LogMessage]) -> list[tuple[str, str, str]]:
    """The (kind, namespace, name) of ``changes``'s objects that no message of the recorded log observes:
    the what-if adds them as new objects (a misspelt name is one); in the order of the CHANGES file."""
    recorded: set[tuple[str, str, str]] = set()
    for message in messages:
        tag = message.headers.get("Kq-Type")
        if tag is not None and tag not in _OBSERVED_TAGS:
            continue
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        identity = identity_of(event) if isinstance(event, types.Fact) else None
        if identity is not None:
            recorded.add(identity)
    return [identity for identity in changes.objects if identity not in recorded]


def identity_of(fact: types.Fact) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a replaceable object's fact (one of :data:`_FIELDS`), else None."""
    if type(fact) not in _FIELDS:
        return None
    kind, namespace, name = subjects.fact_identity(fact)
    return kind, namespace or "", name


def with_metadata(changed: types.Fact, recorded: types.Fact) -> types.Fact:
    """``changed`` with the metadata of the object ``recorded`` observes (same kind)."""
    name = _FIELDS[type(changed)]
    recorded_obj = getattr(recorded, name)
    new_obj = msgspec.structs.replace(getattr(changed, name), metadata=recorded_obj.metadata)
    return msgspec.structs.replace(changed, **{name: new_obj})


_FIELDS: dict[type, str] = {
    types.ClusterQueueObserved: "cluster_queue",
    types.CohortObserved: "cohort",
    types.ResourceFlavorObserved: "flavor",
    types.LocalQueueObserved: "local_queue",
    types.WorkloadPriorityClassObserved: "priority_class",
}


def load(path: Path) -> Changes:
    """Read and validate the CHANGES file at ``path``. Raises ChangesError (see the module)."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ChangesError(f"{path}: cannot be read: {err.strerror or err}") from err
    return parse(text, source=str(path))


def parse(text: str, *, source: str = "<changes>") -> Changes:
    """Parse CHANGES text (see the module). Raises ChangesError naming ``source``, object and field."""
    try:
        docs = manifests.load_documents(text, source=source)
    except manifests.ManifestError as err:
        raise ChangesError(str(err)) from err
    if not docs:
        raise ChangesError(f"{source}: holds no document: nothing to change")
    changes = Changes(source=source)
    for index, doc in enumerate(docs):
        kind, name = manifests.describe(doc)
        where = f"{source}: document {index} ({kind or 'no kind'} {name or '<unnamed>'})"
        api = str(doc.get("apiVersion") or "")
        if kind == OVERRIDES_KIND and api == OVERRIDES_API:
            _overrides(doc, where, changes)
        elif kind == "Configuration" and api.startswith(manager_config.CONFIG_GROUP + "/"):
            try:
                parsed = manager_config.parse(yaml.safe_dump(doc), source=where)
            except manifests.ManifestError as err:
                raise ChangesError(str(err)) from err
            changes.configuration = parsed.configuration
        elif kind in REPLACEABLE and api == manifests.KUEUE_API:
            fact = _object_fact(doc, where)
            identity = identity_of(fact)
            assert identity is not None
            if identity in changes.objects:
                raise ChangesError(f"{where}: {kind} {name} is changed twice")
            changes.objects[identity] = fact
        else:
            raise ChangesError(
                f"{where}: field apiVersion/kind: {api or '?'}/{kind or '?'} cannot be changed by what-if "
                f"(it takes kueue.x-k8s.io/v1beta2 {', '.join(REPLACEABLE)}; a config.kueue.x-k8s.io "
                f"Configuration; {OVERRIDES_API} {OVERRIDES_KIND})"
            )
    return changes


def _object_fact(doc: dict[str, Any], where: str) -> types.Fact:
    try:
        validation.check(doc)
    except validation.Invalid as err:
        raise ChangesError(f"{where}: {err.message}") from err
    try:  # defaulted as the API server defaults it, so as the watcher would record it (diff shows no defaults)
        obj = manifests.parse_object(validation.defaulted(doc))
    except manifests.ManifestError as err:
        raise ChangesError(f"{where}: {err}") from err
    match obj:
        case models.ClusterQueue():
            return types.ClusterQueueObserved(cluster_queue=obj)
        case models.Cohort():
            return types.CohortObserved(cohort=obj)
        case models.ResourceFlavor():
            return types.ResourceFlavorObserved(flavor=obj)
        case models.LocalQueue():
            return types.LocalQueueObserved(local_queue=obj)
        case models.WorkloadPriorityClass():
            return types.WorkloadPriorityClassObserved(priority_class=obj)
    raise ChangesError(f"{where}: not an object what-if replaces")


def _overrides(doc: dict[str, Any], where: str, changes: Changes) -> None:
    unknown = sorted(set(doc) - {"apiVersion", "kind", "metadata", "priorities"})
    if unknown:
        raise ChangesError(f"{where}: field {unknown[0]}: unknown field (it takes priorities)")
    priorities = doc.get("priorities")
    if not isinstance(priorities, dict) or not priorities:
        raise ChangesError(f"{where}: field priorities: must map namespace/name to an integer priority")
    for key, value in priorities.items():
        if not isinstance(key, str) or key.count("/") != 1 or not all(key.split("/")):
            raise ChangesError(f"{where}: field priorities[{key!r}]: must be namespace/name")
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
            raise ChangesError(f"{where}: field priorities[{key}]: {value!r} is not a 32-bit integer")
        changes.priorities[key] = value
