"""Cascading deletion: what a delete's ``propagationPolicy`` asks for, and the garbage collector's rules.

Why this module exists: ``kubectl delete --cascade=orphan|foreground|background`` sends DeleteOptions with
``propagationPolicy`` (``orphanDependents`` is its older form). A real API server turns Orphan and
Foreground into a finalizer on the deleted object (``orphan``, ``foregroundDeletion``) and leaves the rest
to kube-controller-manager's garbage collector, which acts on the object's dependents (the objects whose
``metadata.ownerReferences`` name its UID):

* Orphan: the references to the owner are taken off every dependent, which stays; then the ``orphan``
  finalizer goes, and with it the owner;
* Foreground: the owner stays (``deletionTimestamp`` and ``foregroundDeletion``) while the dependents are
  deleted -- a dependent with dependents of its own in the foreground too, one that has another live owner
  only loses its reference -- and goes once no dependent whose reference has ``blockOwnerDeletion`` is
  left;
* Background: the owner goes at once and the dependents after it (the emulator leaves those to the
  simulated controllers, :mod:`.controllers`, which collect the pods, ReplicaSets and Jobs their kinds own,
  and Workloads by :func:`background_collection`: one whose owners are all gone is deleted, one with a live
  owner left loses its references to the gone ones).

This module holds the pure rules; :class:`kueue_es.sim.store.ObjectStore` applies them as a garbage
collector that never lags (the dependents are dealt with in the same request). Kubernetes sources:
apimachinery ``pkg/apis/meta/v1/validation`` ValidateDeleteOptions, apiserver
``pkg/registry/generic/registry/store.go`` deletionFinalizersForGarbageCollection, kube-controller-manager
``pkg/controller/garbagecollector/garbagecollector.go`` attemptToDeleteItem, orphanDependents and
processDeletingDependentsItem.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kueue_es import validation

ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN = "Orphan"
BACKGROUND = "Background"
FOREGROUND = "Foreground"
#: The propagation policies DeleteOptions takes, in the API server's order.
POLICIES = (FOREGROUND, BACKGROUND, ORPHAN)
_FINALIZER_OF = {ORPHAN: ORPHAN_FINALIZER, FOREGROUND: FOREGROUND_FINALIZER}


def propagation_policy(options: Mapping[str, Any]) -> str | None:
    """The propagation policy of a delete's DeleteOptions (``propagationPolicy``, or ``orphanDependents``
    true for Orphan, false for Background); None when neither is given (the kind's default: Background).

    Raises :class:`kueue_es.validation.Invalid` (``DeleteOptions.meta.k8s.io "" is invalid: ...``, HTTP 422)
    for a policy that is not Foreground, Background or Orphan, or for both fields set, with the API server's
    messages (ValidateDeleteOptions).
    """
    policy = options.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    causes = []
    if orphan is not None and policy is not None:
        message = f"Invalid value: {json.dumps(policy)}: orphanDependents and deletionPropagation cannot be both set"
        causes.append(validation.Cause("propagationPolicy", validation.INVALID, message))
    if policy is not None and policy not in POLICIES:
        supported = ", ".join(json.dumps(p) for p in (*POLICIES, "nil"))
        message = f"Unsupported value: {json.dumps(policy)}: supported values: {supported}"
        causes.append(validation.Cause("propagationPolicy", validation.NOT_SUPPORTED, message))
    if orphan is not None and not isinstance(orphan, bool):
        message = f"Invalid value: {json.dumps(orphan)}: must be true or false"
        causes.append(validation.Cause("orphanDependents", validation.INVALID, message))
    if causes:
        raise validation.Invalid(kind="DeleteOptions", group="meta.k8s.io", name="", causes=causes)
    if orphan is not None:
        return ORPHAN if orphan else BACKGROUND
    return str(policy) if policy is not None else None


def deletion_finalizers(finalizers: Sequence[str], policy: str | None) -> list[str]:
    """The finalizers of an object once a delete with ``policy`` is accepted: a policy given replaces the
    object's ``orphan`` / ``foregroundDeletion`` finalizer by its own (Orphan: ``orphan``, Foreground:
    ``foregroundDeletion``, Background: neither); without one the object keeps what it has (a delete of an
    object already being deleted in the foreground stays so), as deletionFinalizersForGarbageCollection.
    """
    if policy is None:
        return list(finalizers)
    kept = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    if policy in _FINALIZER_OF:
        kept.append(_FINALIZER_OF[policy])
    return kept


def waits_for_dependents(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted in the foreground: it goes once its blocking dependents are gone."""
    meta = obj.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and FOREGROUND_FINALIZER in (meta.get("finalizers") or ())


def orphans_dependents(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted with its dependents orphaned (its ``orphan`` finalizer)."""
    meta = obj.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and ORPHAN_FINALIZER in (meta.get("finalizers") or ())


def owner_uids(obj: Mapping[str, Any]) -> list[str]:
    """The UIDs ``obj``'s ``metadata.ownerReferences`` name, in order."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(ref.get("uid")) for ref in refs if isinstance(ref, Mapping) and ref.get("uid")]


def blocks(dependent: Mapping[str, Any], owner_uid: str) -> bool:
    """Whether ``dependent``'s reference to ``owner_uid`` has ``blockOwnerDeletion``: a foreground deletion of
    that owner waits for it."""
    refs = (dependent.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("uid") == owner_uid and r.get("blockOwnerDeletion") for r in refs)


def without_owners(dependent: Mapping[str, Any], uids: Collection[str]) -> dict[str, Any]:
    """``dependent`` (a copy of its top level and metadata) without its references to ``uids``, as the garbage
    collector patches an orphan."""
    meta = dict(dependent.get("metadata") or {})
    refs = [r for r in meta.get("ownerReferences") or [] if not (isinstance(r, Mapping) and r.get("uid") in uids)]
    if refs:
        meta["ownerReferences"] = refs
    else:
        meta.pop("ownerReferences", None)
    return {**dependent, "metadata": meta}


def references_to_drop(dependent: Mapping[str, Any], owners: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """What the garbage collector does with a dependent of an owner deleted in the foreground, given the
    objects its references name (``owners``: UID -> the object, None when it is gone): the UIDs of the
    references to take off it when another owner is still live (a "solid" owner: there and not waiting for
    its dependents), so it stays; ``[]`` when it has no live owner left and is deleted instead."""
    uids = owner_uids(dependent)
    solid = [uid for uid in uids if (owner := owners.get(uid)) is not None and not waits_for_dependents(owner)]
    if not solid:
        return []
    return [uid for uid in uids if uid not in solid]


def background_collection(
    dependent: Mapping[str, Any], owners: Mapping[str, Mapping[str, Any] | None]
) -> list[str] | None:
    """What the garbage collector does in the background with ``dependent`` given the objects its references name
    (``owners``: UID -> the object, None when it is gone), as attemptToDeleteItem: None while no owner is gone or
    being deleted in the foreground (nothing to do); ``[]`` when no live owner is left ("solid": there and not
    waiting for its dependents): it is deleted; else the UIDs of the references to take off it (the dangling and
    the waiting ones), so it stays with its live owners. A dependent with no reference is nobody's: None."""
    uids = owner_uids(dependent)
    if all((owner := owners.get(uid)) is not None and not waits_for_dependents(owner) for uid in uids):
        return None
    return references_to_drop(dependent, owners)
