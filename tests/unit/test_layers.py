"""The architecture as a test: imports flow services -> projections -> events, never back.

ARCHITECTURE.md §1 and STYLE.md habit 9: ``events`` imports nothing of ours but
itself, ``projections`` only ``events``; services do not import each other's
runners (a service may use another's pure ``core``), and kubernetes-asyncio stays
in the Kubernetes edge (``services/kube``, watcher, dispatcher and the CLI glue).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = ("events", "projections", "services")
RUNNERS = (  # a service's runners: the dispatcher's real and simulated API writers and their collaborators
    "service.py",
    "simulated.py",
    "kube_api.py",
    "job_writes.py",
    "object_sync.py",
    "recording.py",
    "ungating.py",
)
SERVICE_PACKAGES = ("watcher", "admitter", "preemptor", "tas_placer", "dispatcher")
KUBE_ALLOWED = (  # the Kubernetes edge: API clients, the watcher and dispatcher runners, `up` and leases
    "services/kube/",
    "services/watcher/service.py",
    "services/dispatcher/service.py",
    "services/dispatcher/kube_api.py",
    "kueue_es/cli.py",
    "kueue_es/supervisor.py",
    "services/leader.py",
)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", modules("events"), ids=lambda p: str(p.relative_to(ROOT)))
def test_events_import_only_events(path: Path) -> None:
    """events/ is the vocabulary: it depends on nothing else of ours."""
    assert not {m for m in imports_of(path) if m.split(".")[0] in ("projections", "services")}


@pytest.mark.parametrize("path", modules("projections"), ids=lambda p: str(p.relative_to(ROOT)))
def test_projections_import_only_events(path: Path) -> None:
    """projections/ are pure folds over events: no services, no I/O libraries."""
    bad = {m for m in imports_of(path) if m.split(".")[0] in ("services", "nats", "kubernetes_asyncio", "aiohttp")}
    assert not bad


@pytest.mark.parametrize("path", modules("services"), ids=lambda p: str(p.relative_to(ROOT)))
def test_services_do_not_import_each_others_runners(path: Path) -> None:
    """A service package imports another service only through its pure modules (never its runner, ``service``)."""
    rel = path.relative_to(ROOT).as_posix()
    own = rel.split("/")[1] if rel.count("/") >= 2 else None
    for module in imports_of(path):
        parts = module.split(".")
        if len(parts) >= 3 and parts[0] == "services" and parts[1] in SERVICE_PACKAGES and parts[1] != own:
            if own in SERVICE_PACKAGES:
                assert parts[2] != "service", f"{rel} imports {module}"


@pytest.mark.parametrize("path", modules("services"), ids=lambda p: str(p.relative_to(ROOT)))
def test_cores_are_pure(path: Path) -> None:
    """The pure modules of a service (all but its runner, ``service.py``) import no I/O,
    clock or randomness."""
    if path.name in RUNNERS or path.parent.name not in SERVICE_PACKAGES:
        return
    banned = ("asyncio", "time", "datetime", "random", "uuid", "nats", "kubernetes_asyncio", "aiohttp", "os")
    bad = {m for m in imports_of(path) if m.split(".")[0] in banned}
    assert not bad, bad


def test_kubernetes_client_stays_at_the_edge() -> None:
    """kubernetes-asyncio is imported only by the Kubernetes edge."""
    offenders = [
        p.relative_to(ROOT).as_posix()
        for package in OURS
        for p in modules(package)
        if any(m.startswith("kubernetes_asyncio") for m in imports_of(p))
        and not p.relative_to(ROOT).as_posix().startswith(KUBE_ALLOWED)
    ]
    assert offenders == []
