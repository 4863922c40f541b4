"""Kueue's rules stay a pure library, and the deciding services meet only through it.

ARCHITECTURE.md §1: imports flow services -> scheduling -> projections -> events, and the
five services never import each other. ``scheduling/`` decides on a snapshot: no I/O, no
clock, no randomness, nothing of ``services``.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED_OURS = ("kueue_es.events", "kueue_es.projections", "kueue_es.scheduling")
BANNED = ("asyncio", "time", "datetime", "random", "uuid", "os", "nats", "kubernetes", "kubernetes_asyncio", "aiohttp")
DECIDERS = ("admitter", "preemptor", "tas_placer")


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "scheduling").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_scheduling_is_pure_and_imports_no_service(path: Path) -> None:
    """A rule module imports events, projections and scheduling of ours, and no I/O, clock or randomness."""
    imports = imports_of(path)
    ours = {m for m in imports if m.startswith("kueue_es")}
    assert all(m.startswith(ALLOWED_OURS) for m in ours), ours
    assert not {m for m in imports if m.split(".")[0] in BANNED}


@pytest.mark.parametrize("package", DECIDERS)
def test_deciding_services_do_not_import_each_other(package: str) -> None:
    """The admitter, the preemptor and the TAS placer share rules through scheduling/ only."""
    others = tuple(f"kueue_es.services.{other}" for other in DECIDERS if other != package)
    for path in sorted((ROOT / "services" / package).rglob("*.py")):
        bad = {m for m in imports_of(path) if m.startswith(others)}
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
