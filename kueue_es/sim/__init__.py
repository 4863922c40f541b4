"""A Kubernetes cluster without one: the emulated API server and the simulated kubelet.

Why this package exists: no API server runs on the development machines, so
tests, ``kueue-es demo`` and the bench run the watcher and the dispatcher
(which talk to Kubernetes through :mod:`kueue_es.services.kube`) against an
emulated API server, and a simulated kubelet "runs" unsuspended Jobs.

Modules:

* ``selectors`` and ``patches`` -- pure helpers for label/field selectors and
  JSON merge/JSON patches.
* ``store`` -- the emulator's object store: resourceVersions, uid, generation,
  generateName, status subresource, finalizers, per-kind watch history.
* ``emulator`` -- ``ClusterEmulator``, a kmock-based API server in front of
  the store: HTTP routing, watch streams, bookmarks; ``serve_emulator()``.
* ``kubelet`` -- ``SimulatedKubelet``, completes Jobs and started plain pods after a declared time.
"""
