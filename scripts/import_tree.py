"""Lay out the ``kueue_es`` package as one folder tree, for the tools that read source files by path.

setup.py maps the repository's folders into one import name (events/ -> ``kueue_es.events``),
and an editable install serves that mapping through an import hook. Python follows the hook,
but import-linter (grimp) and mypy find a package's files by walking its folder, and
``kueue_es/`` does not contain ``events/``: grimp would see only the tools, and mypy could not
resolve ``kueue_es.events`` at all. This script builds ``build/import-tree/kueue_es/`` out of
real folders and symbolic links to the source files, so both tools see the installed layout
while reading the files you edit. mypy names a file by its link, so
``build/import-tree/kueue_es/events/codec.py`` is ``events/codec.py`` (and
``build/import-tree/kueue_es/cli.py`` is ``kueue_es/cli.py``). ``.ci/run`` runs it before ``lint-imports``
and ``mypy``; run it again after adding or moving a module::

    .venv/bin/python scripts/import_tree.py
    (cd build/import-tree && ../../.venv/bin/lint-imports ../../.importlinter)
    .venv/bin/mypy

The mapping is read from the installed package (``importlib.util.find_spec``), so a folder
setup.py maps is found here without being listed twice.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "kueue_es"


def mapped_folders(root: Path) -> dict[str, Path]:
    """Each installed subpackage of ``kueue_es`` served from a top-level folder of the repository, by name."""
    folders = {PACKAGE: root / PACKAGE}
    for child in sorted(root.iterdir()):
        if not (child / "__init__.py").is_file() or child.name == PACKAGE:
            continue
        spec = importlib.util.find_spec(f"{PACKAGE}.{child.name}")
        locations = list(spec.submodule_search_locations or []) if spec else []
        if [Path(p).resolve() for p in locations] == [child.resolve()]:
            folders[f"{PACKAGE}.{child.name}"] = child
    return folders


def link_tree(source: Path, target: Path) -> None:
    """Real folders under ``target`` mirroring ``source``, each ``.py`` file (and ``.pyi`` stub: protoc's
    beside its generated module) a link back to its source."""
    for path in sorted([*source.rglob("*.py"), *source.rglob("*.pyi")]):
        relative = path.relative_to(source)
        if "__pycache__" in relative.parts:
            continue
        link = target / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(path.resolve())
    (target / "py.typed").touch()


def build(*, root: Path, out: Path) -> None:
    """Replace ``out`` with the ``kueue_es`` tree: the tools' folder, with each mapped folder inside it."""
    if out.exists():
        shutil.rmtree(out)
    for name, folder in mapped_folders(root).items():
        link_tree(folder, out.joinpath(*name.split(".")))


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "build" / "import-tree"
    build(root=ROOT, out=out)
    print(f"{out}: {PACKAGE} laid out as installed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
