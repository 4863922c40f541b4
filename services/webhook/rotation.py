"""Internal certificate management: the Secret kept current and the CA bundle put into the webhook configurations.

Why this module exists: Kueue's ``internalCertManagement`` (enable, webhookServiceName,
webhookSecretName; pkg/util/cert) lets the manager make its own certificates instead
of needing cert-manager: it keeps a CA and a serving certificate in a Secret, renews
them before they expire and writes the CA into the ``caBundle`` of its
Mutating/ValidatingWebhookConfigurations so kube-apiserver trusts the server. This
is the same for the webhook service: :class:`Rotator` reads the Secret, renews what
:func:`.certs.renewed` says is due (the Secret is updated with its resourceVersion as
a precondition, so two replicas do not both win), writes the files the TLS server
loads, and patches the bundle into every webhook of the configurations. Its clock is
passed in, so tests move time instead of sleeping.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors
from kueue_es.services.kube.resources import ResourceRef
from kueue_es.services.webhook import certs

log = structlog.get_logger(__name__)

SECRETS = ResourceRef(group="", version="v1", plural="secrets", kind="Secret", namespaced=True)
MUTATING_CONFIGS = ResourceRef(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="mutatingwebhookconfigurations",
    kind="MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_CONFIGS = ResourceRef(
    group="admissionregistration.k8s.io",
    version="v1",
    plural="validatingwebhookconfigurations",
    kind="ValidatingWebhookConfiguration",
    namespaced=False,
)

CRDS = ResourceRef(
    group="apiextensions.k8s.io",
    version="v1",
    plural="customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
)
#: The CRDs whose conversion webhook is this service (deploy/crds: the kinds Kueue's CRDs convert by webhook,
#: kueue_es.events.v1beta1.WEBHOOK_KINDS), which get the CA in ``spec.conversion.webhook.clientConfig.caBundle``
#: as Kueue's cert-controller gives it to its own CRDs (pkg/util/cert/cert.go, rotator.CRDConversion).
CONVERSION_CRDS = (
    "clusterqueues.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """Where the certificates live and whom they are for (Kueue's internalCertManagement).

    ``namespace``: the webhook's namespace; ``service_name``: its Service (the certificate names
    ``<service>.<namespace>.svc``); ``secret_name``: the Secret holding ``ca.crt``, ``ca.key``,
    ``tls.crt``, ``tls.key``; ``mutating_name`` / ``validating_name``: the configurations whose
    webhooks get the CA bundle; ``conversion_crds``: the CRDs whose conversion webhook gets it too, where it
    is this service (a CRD that is absent or converted by another service, Kueue's own, is left alone); ``lookahead``: renew this long before the end; ``check_every``:
    seconds between checks.
    """

    namespace: str = "kueue-es"
    service_name: str = "kueue-es-webhook-service"
    secret_name: str = "kueue-es-webhook-server-cert"
    mutating_name: str = "kueue-es-mutating-webhook-configuration"
    validating_name: str = "kueue-es-validating-webhook-configuration"
    conversion_crds: tuple[str, ...] = CONVERSION_CRDS
    lookahead: datetime.timedelta = certs.LOOKAHEAD
    check_every: float = 60.0

    @property
    def dns_names(self) -> list[str]:
        """The serving certificate's names (:func:`.certs.service_dns_names`)."""
        return certs.service_dns_names(self.service_name, self.namespace)


def write_files(bundle: certs.Bundle, cert_dir: Path) -> bool:
    """Write ``tls.crt``, ``tls.key`` (0600) and ``ca.crt`` into ``cert_dir``; True when they changed."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    changed = False
    for name, content, mode in (
        (certs.CERT, bundle.cert, 0o644),
        (certs.KEY, bundle.key, 0o600),
        (certs.CA_CERT, bundle.ca_cert, 0o644),
    ):
        path = cert_dir / name
        if path.is_file() and path.read_bytes() == content:
            continue
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(content)
        tmp.chmod(mode)
        tmp.replace(path)
        changed = True
    return changed


class Rotator:
    """Keeps the Secret's certificates current and the configurations' CA bundle equal to its CA.

    ``api``: a kubernetes-asyncio ApiClient; ``cert_dir``: where the server's files go;
    ``clock``: the current UTC time (tests pass their own).
    """

    def __init__(
        self,
        api: k8s_client.ApiClient,
        settings: Settings,
        *,
        cert_dir: Path,
        clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.api, self.settings, self.cert_dir, self.clock = api, settings, cert_dir, clock
        self.bundle: certs.Bundle | None = None
        self.injected = False

    async def check(self) -> bool:
        """One pass: renew the Secret's certificates when due, write the files, inject the CA bundle.
        Returns True when the files changed (the server reloads them). Raises errors.KubeError when the
        API refuses (the caller retries at the next pass)."""
        bundle = await self._current_bundle()
        changed = write_files(bundle, self.cert_dir)
        self.bundle = bundle
        self.injected = await self._inject(bundle.ca_cert)
        return changed

    async def _current_bundle(self) -> certs.Bundle:
        for _ in range(3):  # a conflicting write by another replica: read theirs again
            secret = await self._read_secret()
            stored = certs.Bundle.from_data(_decoded(secret)) if secret is not None else None
            renewed = certs.renewed(stored, self.settings.dns_names, self.clock(), lookahead=self.settings.lookahead)
            if renewed is None:
                assert stored is not None
                return stored
            try:
                await self._write_secret(secret, renewed)
            except errors.ConflictError:
                continue
            log.info(
                "webhook_certificate_renewed",
                secret=f"{self.settings.namespace}/{self.settings.secret_name}",
                new_ca=stored is None or renewed.ca_cert != stored.ca_cert,
                not_after=certs.not_after(renewed.cert).isoformat(),
            )
            return renewed
        raise errors.ConflictError(
            status=409, reason="Conflict", message=f"secret {self.settings.secret_name} kept changing", body={}
        )

    async def _read_secret(self) -> dict[str, Any] | None:
        try:
            return await client.get_object(
                self.api, SECRETS, namespace=self.settings.namespace, name=self.settings.secret_name
            )
        except errors.NotFoundError:
            return None

    async def _write_secret(self, secret: dict[str, Any] | None, bundle: certs.Bundle) -> None:
        data = {k: base64.b64encode(v).decode() for k, v in bundle.data().items()}
        if secret is None:
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": self.settings.secret_name, "namespace": self.settings.namespace},
                "type": "Opaque",
                "data": data,
            }
            await client.create_object(self.api, SECRETS, namespace=self.settings.namespace, body=body)
            return
        body = {**secret, "data": data}  # metadata.resourceVersion: the update is refused if it changed
        await client.replace_object(
            self.api, SECRETS, namespace=self.settings.namespace, name=self.settings.secret_name, body=body
        )

    async def _inject(self, ca_cert: bytes) -> bool:
        """Put the CA into ``clientConfig.caBundle`` of every webhook of both configurations; True when both
        exist and carry it."""
        bundle = base64.b64encode(ca_cert).decode()
        done = True
        for ref, name in (
            (MUTATING_CONFIGS, self.settings.mutating_name),
            (VALIDATING_CONFIGS, self.settings.validating_name),
        ):
            try:
                config = await client.get_object(self.api, ref, name=name)
            except errors.NotFoundError:
                log.warning("webhook_configuration_missing", kind=ref.kind, name=name)
                done = False
                continue
            hooks = config.get("webhooks") or []
            if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
                continue
            for hook in hooks:
                hook.setdefault("clientConfig", {})["caBundle"] = bundle
            try:
                await client.replace_object(self.api, ref, name=name, body=config)
            except errors.ConflictError:
                done = False  # changed meanwhile: the next pass injects again
                continue
            log.info("webhook_ca_bundle_injected", kind=ref.kind, name=name, webhooks=len(hooks))
        await self._inject_conversion(bundle)
        return done

    async def _inject_conversion(self, bundle: str) -> None:
        """Put the CA (base64) into the conversion webhook ``clientConfig.caBundle`` of each CRD of
        ``settings.conversion_crds`` that calls this service; the others, and a missing CRD, are left alone (a
        cluster may run with Kueue's CRDs, deploy/without-crds). Readiness does not wait for them: only a
        v1beta1 request needs the conversion."""
        for name in self.settings.conversion_crds:
            try:
                crd = await client.get_object(self.api, CRDS, name=name)
            except errors.NotFoundError:
                continue
            conversion = (crd.get("spec") or {}).get("conversion") or {}
            config = (conversion.get("webhook") or {}).get("clientConfig") or {}
            service = config.get("service") or {}
            ours = (service.get("name"), service.get("namespace")) == (
                self.settings.service_name,
                self.settings.namespace,
            )
            if conversion.get("strategy") != "Webhook" or not ours or config.get("caBundle") == bundle:
                continue
            config["caBundle"] = bundle
            try:
                await client.replace_object(self.api, CRDS, name=name, body=crd)
            except errors.ConflictError:
                continue  # changed meanwhile: the next pass injects again
            log.info("conversion_ca_bundle_injected", crd=name)

    async def run(self, stop: asyncio.Event, *, on_change: Callable[[], object]) -> None:
        """:meth:`check` every ``settings.check_every`` seconds until ``stop`` is set, calling ``on_change``
        when the files changed; an API error is logged and retried at the next pass."""
        while not stop.is_set():
            try:
                if await self.check():
                    on_change()
            except (errors.KubeError, ValueError) as err:
                log.warning("webhook_certificate_check_failed", error=str(err))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.check_every):
                    await stop.wait()


def _decoded(secret: dict[str, Any]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (secret.get("data") or {}).items():
        with contextlib.suppress(ValueError, TypeError):
            out[key] = base64.b64decode(value)
    return out


def ca_bundles(config: dict[str, Any]) -> Sequence[str | None]:
    """The ``clientConfig.caBundle`` of each webhook of a configuration (None where unset)."""
    return [(h.get("clientConfig") or {}).get("caBundle") for h in config.get("webhooks") or []]
