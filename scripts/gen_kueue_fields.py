"""Regenerate events/kueue_fields.py from Kueue's published CRDs (v1beta2).

Usage: python scripts/gen_kueue_fields.py PATH/TO/kueue/config/components/crd/bases > events/kueue_fields.py

Lists, per kind, the field names the CRD's openAPI schema declares, nested; a field whose
value is free-form (a map, a quantity, a scalar) maps to None. ``metadata``, ``status`` and
pod ``template``s are not listed (the API server and Kubernetes' own types check those).
"""

from __future__ import annotations

import pprint
import sys
from pathlib import Path
from typing import Any

import yaml

KINDS = (
    "admissionchecks",
    "clusterqueues",
    "cohorts",
    "localqueues",
    "multikueueclusters",
    "multikueueconfigs",
    "resourceflavors",
    "topologies",
    "workloadpriorityclasses",
    "workloads",
)
NOT_LISTED = {"metadata", "status", "template"}


def known(schema: Any) -> dict[str, Any] | None:
    if not isinstance(schema, dict):
        return None
    if schema.get("type") == "array":
        return known(schema.get("items"))
    properties = schema.get("properties")
    if properties is None:
        return None
    return {key: None if key in NOT_LISTED else known(value) for key, value in sorted(properties.items())}


def main(bases: Path) -> None:
    fields: dict[str, Any] = {}
    for plural in KINDS:
        doc = yaml.safe_load((bases / f"kueue.x-k8s.io_{plural}.yaml").read_text())
        for version in doc["spec"]["versions"]:
            if version["name"] == "v1beta2":
                fields[doc["spec"]["names"]["kind"]] = known(version["schema"]["openAPIV3Schema"])
    print('"""The field names of Kueue\'s v1beta2 kinds, from its CRDs (scripts/gen_kueue_fields.py).')
    print()
    print("Per kind a tree of field name -> the names under it (None: not checked further).")
    print('What strict field validation (kubectl\'s default) refuses anything outside of."""')
    print()
    print("from typing import Any")
    print()
    print(f"KNOWN_FIELDS: dict[str, Any] = {pprint.pformat(fields, width=110, sort_dicts=True)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
