"""The Kubernetes edge of kueue-es: the client side and a simulated cluster.

Why this package exists: the watcher and the dispatcher talk to Kubernetes
through one small, dict-based layer over kubernetes-asyncio (``client``), and
everything that needs a cluster without having one (tests, ``kueue-es demo``,
the bench) runs against an emulated API server (``emulator``) and a simulated
kubelet that "runs" unsuspended Jobs (``kubelet``).

Modules:

* ``resources`` -- the registry of kinds we know: apiVersion/kind -> plural,
  namespaced, status subresource. Shared by the client and the emulator.
* ``errors`` -- our exception hierarchy for the Kubernetes boundary.
* ``selectors`` and ``patches`` -- pure helpers for label/field selectors and
  JSON merge/JSON patches (used by the emulator).
* ``client`` -- make an ApiClient, CRUD on any registered kind, apply a
  manifest, and the list+watch loop (``watch_objects``).
* ``store`` -- the emulator's object store: resourceVersions, uid, generation,
  generateName, status subresource, finalizers, per-kind watch history.
* ``emulator`` -- ``ClusterEmulator``, a kmock-based API server in front of
  the store: HTTP routing, watch streams, bookmarks; ``serve_emulator()``.
* ``kubelet`` -- ``SimulatedKubelet``, completes Jobs after a declared time.
"""
