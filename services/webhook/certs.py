"""The webhook server's certificates: a self-signed CA and a serving certificate it signs, renewed before expiry.

Why this module exists: kube-apiserver calls an admission webhook over HTTPS and
checks its certificate against the ``caBundle`` of the webhook configuration, so
the server needs a certificate for its Service's DNS name and the configurations
need the CA that signed it. Kueue's internal certificate management
(pkg/util/cert/cert.go, with open-policy-agent's cert-controller rotator) keeps
both in a Secret (``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``): a CA valid ten
years and a serving certificate valid one, each made again when it is missing,
broken, not for the right name or within 90 days of its end, checked every 12
hours. This module is that decision and the certificates (``cryptography``), with
the time passed in; :mod:`.rotation` reads and writes the Secret and the
configurations.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY, CERT, KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
#: cert-controller's defaults (rotator.go), which Kueue keeps.
CA_VALIDITY = datetime.timedelta(days=10 * 365)
CERT_VALIDITY = datetime.timedelta(days=365)
LOOKAHEAD = datetime.timedelta(days=90)
CHECK_EVERY = datetime.timedelta(hours=12)
CA_NAME, CA_ORGANIZATION = "kueue-es-ca", "kueue-es"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Bundle:
    """The four PEM files a Secret holds: the CA's certificate and key, the serving certificate and key."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def data(self) -> dict[str, bytes]:
        """The Secret's ``data`` keys (before base64): ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key``."""
        return {CA_CERT: self.ca_cert, CA_KEY: self.ca_key, CERT: self.cert, KEY: self.key}

    @classmethod
    def from_data(cls, data: dict[str, bytes]) -> Bundle | None:
        """The bundle of a Secret's decoded ``data``, or None when a key is missing."""
        if not all(data.get(k) for k in (CA_CERT, CA_KEY, CERT, KEY)):
            return None
        return cls(ca_cert=data[CA_CERT], ca_key=data[CA_KEY], cert=data[CERT], key=data[KEY])


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names kube-apiserver may use for a Service: ``svc``, ``svc.ns``, ``svc.ns.svc`` and the cluster
    domain form; the first one cert-controller signs is ``svc.ns.svc``, which is what the API server checks."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}", service]


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _names(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def new_ca(now: datetime.datetime, *, validity: datetime.timedelta = CA_VALIDITY) -> tuple[bytes, bytes]:
    """``(certificate PEM, key PEM)`` of a new CA (EC P-256) valid from an hour before ``now`` for ``validity``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, CA_ORGANIZATION),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def new_serving_cert(
    ca_cert: bytes,
    ca_key: bytes,
    names: Sequence[str],
    now: datetime.datetime,
    *,
    validity: datetime.timedelta = CERT_VALIDITY,
) -> tuple[bytes, bytes]:
    """``(certificate PEM, key PEM)`` for ``names`` (DNS names or IP addresses; the first is the subject),
    signed by the CA, valid from an hour before ``now`` for ``validity`` (never past the CA's end).
    Raises ValueError for an unreadable CA."""
    issuer = x509.load_pem_x509_certificate(ca_cert)
    issuer_key = serialization.load_pem_private_key(ca_key, password=None)
    if not isinstance(issuer_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    end = min(now + validity, issuer.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(_names(names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
        .sign(issuer_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def new_bundle(names: Sequence[str], now: datetime.datetime) -> Bundle:
    """A new CA and a serving certificate for ``names`` it signs."""
    ca_cert, ca_key = new_ca(now)
    cert, key = new_serving_cert(ca_cert, ca_key, names, now)
    return Bundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key)


def _valid_until(pem: bytes, now: datetime.datetime, lookahead: datetime.timedelta) -> x509.Certificate | None:
    """The certificate when it parses and is valid from ``now`` for at least ``lookahead``, else None."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None
    if cert.not_valid_before_utc > now or cert.not_valid_after_utc <= now + lookahead:
        return None
    return cert


def ca_usable(bundle: Bundle, now: datetime.datetime, *, lookahead: datetime.timedelta = LOOKAHEAD) -> bool:
    """Whether the bundle's CA parses, matches its key and stays valid past ``now + lookahead``
    (cert-controller validCACert)."""
    cert = _valid_until(bundle.ca_cert, now, lookahead)
    if cert is None:
        return False
    try:
        key = serialization.load_pem_private_key(bundle.ca_key, password=None)
    except ValueError:
        return False
    return key.public_key() == cert.public_key()


def serving_usable(
    bundle: Bundle, names: Sequence[str], now: datetime.datetime, *, lookahead: datetime.timedelta = LOOKAHEAD
) -> bool:
    """Whether the serving certificate parses, matches its key, is signed by the bundle's CA, names
    ``names[0]`` and stays valid past ``now + lookahead`` (cert-controller validServerCert)."""
    cert = _valid_until(bundle.cert, now, lookahead)
    if cert is None:
        return False
    try:
        key = serialization.load_pem_private_key(bundle.key, password=None)
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    if key.public_key() != cert.public_key():
        return False
    wanted = _names(names[:1])[0]
    return wanted in list(sans)


def renewed(
    bundle: Bundle | None, names: Sequence[str], now: datetime.datetime, *, lookahead: datetime.timedelta = LOOKAHEAD
) -> Bundle | None:
    """The bundle to store instead of ``bundle``, or None when it is good as it is: a new CA and certificate
    when the CA is missing or due (within ``lookahead`` of its end), a new certificate from the same CA when
    only the certificate is (cert-controller refreshCertIfNeeded)."""
    if bundle is None or not ca_usable(bundle, now, lookahead=lookahead):
        return new_bundle(names, now)
    if not serving_usable(bundle, names, now, lookahead=lookahead):
        cert, key = new_serving_cert(bundle.ca_cert, bundle.ca_key, names, now)
        return dataclasses.replace(bundle, cert=cert, key=key)
    return None


def not_after(pem: bytes) -> datetime.datetime:
    """The end of a certificate's validity (UTC). Raises ValueError for one that does not parse."""
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc
