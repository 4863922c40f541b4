"""Kubernetes' label and name rules (apimachinery pkg/util/validation), worded as Kubernetes words them.

Why this module exists: Kueue's webhooks and its configuration check label keys, label values and qualified names with
apimachinery's helpers -- a Workload's pod set updates (:mod:`.workload_webhook`), a job's topology
annotations (:mod:`.webhooks`), a ResourceFlavor's node labels and taints (:mod:`kueue_es.validation`) -- and
their refusals quote apimachinery's messages; one copy of those rules serves all of them. Pure: each function
returns the problems with a value (none for a valid one).
"""

from __future__ import annotations

import re
from typing import Final

# apimachinery pkg/util/validation/validation.go: qualified names, label values, DNS-1123 subdomains.
QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    f"character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}')"
)
LABEL_VALUE_FMT: Final = f"({QUALIFIED_NAME_FMT})?"
LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for "
    f"validation is '{LABEL_VALUE_FMT}')"
)
SUBDOMAIN_FMT: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{SUBDOMAIN_FMT}')"
)


def qualified_name_problems(value: str) -> list[str]:
    """validation.IsQualifiedName: an optional DNS-1123 subdomain prefix and ``/``, then a name of at most 63
    alphanumerics, ``-``, ``_`` or ``.``, starting and ending alphanumeric."""
    parts = value.split("/")
    problems: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {problem}" for problem in subdomain_problems(prefix)]
    else:
        return [
            f"a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not re.fullmatch(QUALIFIED_NAME_FMT, name):
        problems.append(f"name part {QUALIFIED_NAME_MSG}")
    return problems


def subdomain_problems(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain."""
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not re.fullmatch(SUBDOMAIN_FMT, value):
        problems.append(SUBDOMAIN_MSG)
    return problems


def label_value_problems(value: str) -> list[str]:
    """validation.IsValidLabelValue: at most 63 characters, empty or alphanumerics with ``-``, ``_``, ``.``
    inside; the problems as Kubernetes words them, none for a valid value."""
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not re.fullmatch(LABEL_VALUE_FMT, value):
        problems.append(LABEL_VALUE_MSG)
    return problems
