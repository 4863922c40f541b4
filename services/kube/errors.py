"""Errors raised at the Kubernetes boundary of kueue-es.

Why this module exists: callers of ``kueue_es.services.kube.client`` should not need to
know kubernetes-asyncio's ``ApiException`` or aiohttp's exceptions.  The client
wraps them (``raise ... from``) into this small hierarchy, keyed by what the
caller does next: ``ConnectionFailedError`` (retry later), ``NotFoundError`` (create it, or forget it),
``ConflictError`` (re-read and retry, or it already exists), ``ExpiredError``
(relist), everything else ``ApiError`` with the HTTP status and the
Kubernetes ``reason``.
"""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    """Base class of every error raised by ``kueue_es.services.kube``."""


class UnknownKindError(KubeError, LookupError):
    """The apiVersion/kind pair is not in ``resources.RESOURCES``."""


class InvalidManifestError(KubeError, ValueError):
    """A manifest cannot be applied as written (e.g. it has no name and no generateName)."""


class ConnectionFailedError(KubeError):
    """The API server could not be reached, or the connection broke mid-response."""


class ApiError(KubeError):
    """The API server answered with an error Status.

    ``status`` is the HTTP status code, ``reason`` the Status reason
    (``NotFound``, ``AlreadyExists``, ``Conflict``, ``Expired``, ...),
    ``message`` the server's sentence, ``body`` the decoded Status if any.
    """

    def __init__(self, *, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class NotFoundError(ApiError):
    """404: the object (or the resource type) does not exist."""


class ConflictError(ApiError):
    """409: the object already exists, or a resourceVersion precondition failed."""


class ExpiredError(ApiError):
    """410: the requested resourceVersion is older than the server's history; relist."""


class TooLargeResourceVersionError(ExpiredError):
    """504 with the cause ResourceVersionTooLarge: the server has not reached the requested resourceVersion
    (a client resuming from another server's history); relist, as client-go's reflector does."""


def error_for_status(*, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> ApiError:
    """Build the most specific ApiError subclass for an HTTP status."""
    cls: type[ApiError] = {404: NotFoundError, 409: ConflictError, 410: ExpiredError}.get(status, ApiError)
    causes = ((body or {}).get("details") or {}).get("causes") or []
    if status == 504 and any(isinstance(c, dict) and c.get("reason") == "ResourceVersionTooLarge" for c in causes):
        cls = TooLargeResourceVersionError
    return cls(status=status, reason=reason, message=message, body=body)
