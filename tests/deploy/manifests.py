"""The manifests under deploy/: every YAML document with the file and lines it came from."""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KUSTOMIZATIONS = ("kustomization.yaml",)
#: Files under deploy/ that are not Kubernetes objects: Kueue's manager configuration (a ConfigMap's content).
NOT_MANIFESTS = ("controller_manager_config.yaml",)
#: Monitoring with the Prometheus Operator's kinds (PrometheusRule), a kustomization of its own outside the base
#: (tests/deploy/test_monitoring.py).
MONITORING = DEPLOY / "monitoring"
#: deploy/base with cert-manager's kinds (Issuer, Certificate) for the webhook's certificate, an overlay outside the
#: base (tests/deploy/test_webhook_manifests.py).
CERTMANAGER = DEPLOY / "certmanager"


@dataclass(frozen=True)
class Document:
    """One YAML document of a manifest file: parsed, its text, and its lines (1-based, inclusive)."""

    path: Path
    first_line: int
    last_line: int
    text: str
    obj: dict[str, Any]

    @property
    def label(self) -> str:
        meta = self.obj.get("metadata") or {}
        return f"{self.path.relative_to(DEPLOY)}:{self.first_line} {self.obj.get('kind')}/{meta.get('name')}"


def manifest_files() -> list[Path]:
    """Every Kubernetes manifest file under deploy/ (kustomizations, deploy/monitoring and deploy/certmanager excluded)."""
    return sorted(
        p
        for p in DEPLOY.rglob("*.yaml")
        if p.name not in (*KUSTOMIZATIONS, *NOT_MANIFESTS)
        and MONITORING not in p.parents
        and CERTMANAGER not in p.parents
    )


#: libyaml's loader when PyYAML has it: the same objects as yaml.safe_load, several times as fast (deploy/ holds
#: megabytes of CRDs)
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def documents(path: Path) -> list[Document]:
    """The non-empty documents of ``path`` with their line ranges (read once while the file is unchanged: the
    objects are shared, so a caller that changes one copies it first, as :func:`find` does)."""
    stat = path.stat()
    return list(_parsed(path, stat.st_mtime_ns, stat.st_size))


@functools.cache
def _parsed(path: Path, mtime_ns: int, size: int) -> tuple[Document, ...]:
    """The documents of ``path`` as it was at (``mtime_ns``, ``size``)."""
    lines = path.read_text().splitlines(keepends=True)
    starts = [0] + [i + 1 for i, line in enumerate(lines) if re.match(r"^---\s*$", line)]
    out = []
    for index, start in enumerate(starts):
        end = (starts[index + 1] - 1) if index + 1 < len(starts) else len(lines)
        text = "".join(lines[start:end])
        obj = yaml.load(text, Loader=_LOADER)
        if obj:
            out.append(Document(path=path, first_line=start + 1, last_line=end, text=text, obj=obj))
    return tuple(out)


def all_documents() -> list[Document]:
    return [doc for path in manifest_files() for doc in documents(path)]


def find(kind: str, name: str) -> dict[str, Any]:
    """The one object of ``kind`` named ``name`` under deploy/ (a copy of its own)."""
    (found,) = [d.obj for d in all_documents() if d.obj.get("kind") == kind and d.obj["metadata"]["name"] == name]
    return copy.deepcopy(found)
