"""Which API server ``kubectl kueue`` talks to, and the requests it sends there.

kubectl's rules pick the kubeconfig (k8s.io/client-go/tools/clientcmd, loading rules): ``--kubeconfig
FILE``, else the files listed in ``$KUBECONFIG`` (merged, the first naming a thing wins), else
``~/.kube/config``; ``--context`` picks a context other than the current one, and ``-n/--namespace``
overrides the context's namespace (``default`` when it names none). kueue-es adds one rule after
kubectl's: when none of those files exists, the kubeconfig of the running ``kueue-es demo --keep``
(:func:`kueue_es.current.find`), so ``kubectl kueue list workload`` works bare on the demo.

Requests go through kubernetes-asyncio's ``ApiClient`` (its authentication: tokens, client
certificates, exec plugins) with client-go's User-Agent for ``kubectl-kueue`` (:func:`user_agent`: the API server
records kueuectl's writes as that manager's) and return JSON dicts; errors become :class:`Failure` with the message
kueuectl prints after ``Error:`` (the API's Status message, e.g. ``clusterqueues.kueue.x-k8s.io "x" not
found``; for an unreachable server the request and the network error) and exit code 1.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

from kueue_es import current

JSON = "application/json"
COMMAND = "kubectl-kueue"
"""kueuectl's binary: client-go's User-Agent starts with it, and the API server names the manager of each write
after that first word (``metadata.managedFields``), as kueuectl sets no fieldManager."""
MERGE_PATCH = "application/merge-patch+json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
DEFAULT_LIST_LIMIT = 100
LIST_LIMIT_ENV = "KUEUECTL_LIST_REQUEST_LIMIT"  # kueuectl's (cmd/kueuectl/app/list/helpers.go)


class Failure(Exception):
    """A command failed: ``str(self)`` is the message printed after ``Error:``, ``code`` the exit code."""

    def __init__(self, message: str, *, code: int = 1, reason: str = "", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason  # the API's Status reason (NotFound, AlreadyExists, ...) when it answered
        self.status = status


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The connection flags as given (None: not given)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None


def kubeconfig_files(settings: Settings) -> tuple[list[str], str]:
    """The kubeconfig files kubectl would read, in order, and where they came from (for messages).

    ``--kubeconfig`` must exist (``stat FILE: no such file or directory``, as kubectl); ``$KUBECONFIG``
    contributes its existing entries; ``~/.kube/config`` when it exists; else the running demo's
    kubeconfig (:mod:`kueue_es.current`). Raises Failure (exit 1) when there is none at all.
    """
    if settings.kubeconfig:
        path = os.path.expanduser(settings.kubeconfig)
        if not os.path.isfile(path):
            raise Failure(f"stat {settings.kubeconfig}: no such file or directory")
        return [path], "--kubeconfig"
    listed = [os.path.expanduser(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p.strip()]
    existing = [p for p in listed if os.path.isfile(p)]
    if existing:
        return existing, "$KUBECONFIG"
    home = Path.home() / ".kube" / "config"
    if not listed and home.is_file():
        return [str(home)], str(home)
    try:
        system = current.find()
    except current.NoSystemError as err:
        tried = "$KUBECONFIG names no existing file" if listed else f"no --kubeconfig, no $KUBECONFIG, no {home}"
        raise Failure(f"no kubeconfig found ({tried}), and {err}") from None
    if system.kubeconfig is None or not system.kubeconfig.is_file():
        raise Failure(
            f"no kubeconfig found, and the running kueue-es ({system.origin}) recorded none: "
            "give one with --kubeconfig or $KUBECONFIG"
        )
    if system.others:  # said on stderr: stdout stays the answer
        others = [f"{s.origin}: {s.kubeconfig}" for s in current.running() if s.kubeconfig != system.kubeconfig]
        sys.stderr.write(
            f"Warning: {len(system.others) + 1} kueue-es are running: using the kubeconfig {system.kubeconfig} of"
            f" the newest; the others' ({'; '.join(others) or ', '.join(system.others)}) with --kubeconfig\n"
        )
    return [str(system.kubeconfig)], f"the running kueue-es ({system.origin})"


def _same_file(left: str, right: str) -> bool:
    try:
        return os.path.samefile(left, right)
    except OSError:
        return False


def system_for(files: list[str]) -> current.System | None:
    """The running kueue-es whose log is the cluster's of the kubeconfig ``files`` (:func:`kubeconfig_files`):
    of those recorded (:func:`kueue_es.current.running`, several may run) the one whose recorded kubeconfig
    is one of ``files``, else the one :func:`kueue_es.current.find` names when it recorded no kubeconfig
    (``up`` against a real cluster); None when none is. What every reader of the log in ``kubectl kueue``
    uses: POSITION IN QUEUE and the commands it runs ``kueue-es`` for."""
    try:
        named: current.System | None = current.find()
    except current.NoSystemError:
        named = None
    candidates = ([named] if named is not None else []) + current.running()
    for system in candidates:
        if system.kubeconfig is not None and any(_same_file(str(system.kubeconfig), f) for f in files):
            return system
    return named if named is not None and named.kubeconfig is None else None


@dataclass(kw_only=True)
class Cluster:
    """An open connection: the client, the namespace in effect, and the kubeconfig it came from."""

    api: k8s_client.ApiClient
    namespace: str
    kubeconfig: list[str]
    origin: str
    server: str
    _discovery: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> dict[str, Any]:
        """One request; returns the decoded JSON body. Raises Failure: the Status message and reason for an
        API error (``status`` set), the request and the network error when the server cannot be reached."""
        try:
            response = await self.api.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
            )
            text = await response.read()
            status = int(response.status)
            response.release()
        except k8s_client.ApiException as exc:
            raise _api_failure(exc.status or 0, exc.body, exc.reason) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise Failure(
                f'{method.capitalize()} "{self.server}{path}": {exc or exc.__class__.__name__}'
                f" - the connection to the server {self.server} failed: did you specify the right host or port?"
            ) from None
        if not 200 <= status <= 299:
            raise _api_failure(status, text, getattr(response, "reason", None))
        try:
            decoded = json.loads(text) if text else {}
        except ValueError:
            raise Failure(f"{method} {path}: the server answered something that is not JSON") from None
        return decoded if isinstance(decoded, dict) else {}

    async def list_pages(
        self, path: str, *, label_selector: str = "", field_selector: str = "", accept: str = JSON
    ) -> AsyncIterator[dict[str, Any]]:
        """Each page of a LIST, ``limit`` objects at a time (``$KUEUECTL_LIST_REQUEST_LIMIT``, default 100,
        as kueuectl), following ``continue`` tokens."""
        limit = list_limit()
        token = ""
        while True:
            query = [("limit", str(limit))]
            query += [("labelSelector", label_selector)] if label_selector else []
            query += [("fieldSelector", field_selector)] if field_selector else []
            query += [("continue", token)] if token else []
            page = await self.request("GET", path, query=query, accept=accept)
            yield page
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return

    async def resources_of(self, api_version: str) -> dict[str, Any] | None:
        """The discovery document (APIResourceList) of ``api_version`` (``v1``, ``batch/v1``), or None when
        the server does not serve it; cached for this connection."""
        if api_version not in self._discovery:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            try:
                self._discovery[api_version] = await self.request("GET", path)
            except Failure as err:
                if err.status != 404:
                    raise
                self._discovery[api_version] = None
        return self._discovery[api_version]


_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "i686": "386", "i386": "386"}


def user_agent() -> str:
    """client-go's default User-Agent for ``kubectl-kueue`` (rest.DefaultKubernetesUserAgent): the command, its
    version, the platform as Go names it and the commit (``unknown``, as client-go writes an empty one), e.g.
    ``kubectl-kueue/v0.1.0 (linux/amd64) kubernetes/unknown``."""
    try:
        version = metadata.version("kueue-es")
    except metadata.PackageNotFoundError:
        version = "unknown"
    machine = platform.machine().lower()
    system = platform.system().lower() or "unknown"
    return f"{COMMAND}/v{version} ({system}/{_GOARCH.get(machine, machine or 'unknown')}) kubernetes/unknown"


def list_limit() -> int:
    """kueuectl's page size: ``$KUEUECTL_LIST_REQUEST_LIMIT`` or 100. Raises Failure on a non-integer."""
    text = os.environ.get(LIST_LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_LIST_LIMIT
    try:
        return int(text)
    except ValueError:
        raise Failure("invalid list request limit") from None


async def open_cluster(settings: Settings) -> Cluster:
    """Load the kubeconfig (:func:`kubeconfig_files`) with ``settings.context`` and open a client. Raises
    Failure for a missing file, an unknown context (``context was not found for specified context:
    NAME``, as kubectl) or a kubeconfig kubernetes-asyncio cannot use."""
    files, origin = kubeconfig_files(settings)
    merger = KubeConfigMerger(os.pathsep.join(files))
    if merger.config is None:
        raise Failure(f"no configuration in {', '.join(files)}")
    if settings.context is None:
        first_current = _first_current_context(files)
        if first_current:  # kubectl: the first file that names a current context wins
            merger.config.value["current-context"] = first_current
    try:
        loader = KubeConfigLoader(config_dict=merger.config, config_base_path=None, active_context=settings.context)
        configuration = k8s_client.Configuration()
        await loader.load_and_set(configuration)
    except ConfigException as err:
        if settings.context:
            raise Failure(f"context was not found for specified context: {settings.context}") from None
        raise Failure(f"invalid kubeconfig {', '.join(files)}: {err}") from None
    except (KeyError, TypeError, AssertionError) as err:
        raise Failure(f"invalid kubeconfig {', '.join(files)}: {err!r}") from None
    context = loader.current_context or {}
    namespace = settings.namespace or (context.get("context") or {}).get("namespace") or "default"
    api = k8s_client.ApiClient(configuration)
    api.user_agent = user_agent()  # the writes are kubectl-kueue's (managedFields), not kubernetes-asyncio's
    return Cluster(
        api=api,
        namespace=namespace,
        kubeconfig=files,
        origin=origin,
        server=str(configuration.host),
    )


def _first_current_context(files: list[str]) -> str | None:
    import yaml

    for path in files:
        try:
            with open(path, encoding="utf-8") as stream:
                doc = yaml.safe_load(stream) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(doc, dict) and doc.get("current-context"):
            return str(doc["current-context"])
    return None


def _api_failure(status: int, body: Any, reason: str | None) -> Failure:
    try:
        decoded = json.loads(body) if isinstance(body, (str, bytes)) and body else {}
    except ValueError:
        decoded = {}
    if not isinstance(decoded, dict):
        decoded = {}
    why = str(decoded.get("reason") or reason or "Unknown")
    message = str(decoded.get("message") or body or "")
    return Failure(message or f"the server answered {status} {why}", reason=why, status=status)
