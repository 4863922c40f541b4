"""docs/design.md opens with the repository's tree, one line per folder: it must match the code.

A folder that holds source (a ``.py`` file, or a tracked file under deploy/) and is missing from
the tree, or a folder the tree names that is gone, fails here, so the map cannot drift from the
territory. Folders below ``tests/scenarios/`` are described by their parent's line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREE_LINE = re.compile(r"^([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/)\s")


def _tree_folders() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text()
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    return {m.group(1).rstrip("/") for line in block.splitlines() if (m := TREE_LINE.match(line))}


def _code_folders() -> set[str]:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    folders = set()
    for name in files:
        path = Path(name)
        if path.parent == Path(".") or not (ROOT / path).exists():
            continue
        if path.parts[0] == "tests" and len(path.parts) > 3 and path.parts[1] == "scenarios":
            continue
        if path.suffix == ".py" or path.parts[0] in ("deploy", ".ci", "docs", "tests") or path.suffix == ".yaml":
            folders.add(path.parent.as_posix())
    return folders


def test_every_source_folder_is_in_the_design_tree() -> None:
    """A folder with code (or manifests, docs, tests) is described in docs/design.md's tree."""
    missing = _code_folders() - _tree_folders()
    assert not missing, f"add these folders to docs/design.md's tree: {sorted(missing)}"


def test_every_folder_in_the_design_tree_exists() -> None:
    """The tree names no folder the repository no longer has."""
    gone = {folder for folder in _tree_folders() if not (ROOT / folder).is_dir()}
    assert not gone, f"docs/design.md's tree names folders that are gone: {sorted(gone)}"
