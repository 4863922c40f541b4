"""The demo's kubeconfig appears whole: written beside its path and renamed.

A test waiting for ``kueue-es demo`` read the kubeconfig once it existed and found it empty (the
file was created, then written), so ``yaml.safe_load`` gave None. kubectl run by a user at that
moment fails the same way. ``write_kubeconfig`` now writes a temporary file and renames it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from kueue_es.services.kube import client


def test_the_kubeconfig_is_renamed_into_place_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "kubeconfig"
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        # at the moment it appears under its name, the file is already complete
        seen.append((Path(dst).name, Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(client.os, "replace", replace)
    client.write_kubeconfig(target, server="http://127.0.0.1:6443/")
    [(name, text)] = seen
    assert name == "kubeconfig"
    assert yaml.safe_load(text)["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:6443"
    assert [p.name for p in tmp_path.iterdir()] == ["kubeconfig"]
