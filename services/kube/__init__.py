"""The Kubernetes edge of kueue-es: the client side the watcher and the dispatcher share.

Why this package exists: the watcher and the dispatcher talk to Kubernetes
through one small, dict-based layer over kubernetes-asyncio. It is the only
place of the services, with those two, that imports a Kubernetes client. The
emulated API server and the simulated kubelet that stand in for a cluster are
in :mod:`kueue_es.sim`.

Modules:

* ``resources`` -- the registry of kinds we know: apiVersion/kind -> plural,
  namespaced, status subresource. Shared by the client and the emulator.
* ``errors`` -- our exception hierarchy for the Kubernetes boundary.
* ``client`` -- make an ApiClient, CRUD on any registered kind, apply a
  manifest, and the list+watch loop (``watch_objects``).
"""
