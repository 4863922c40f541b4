"""Kubernetes quantities as exact integers: CPU in millicores, everything else in units.

Kueue turns every quota and request into an int64 "amount" (SEMANTICS §0.1,
Kueue pkg/resources/amount.go): CPU through ``MilliValue()``, every other resource
(memory in bytes, pods, GPUs) through ``Value()``, both rounded up. Parsing the
Quantity grammar itself is left to the Kubernetes client library's
``parse_quantity`` (exact ``Decimal``); this module adds the validation Kubernetes
does (no NaN, no infinity, sign rules) and the integer scaling.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

from kubernetes.utils.quantity import parse_quantity

#: Kueue's ``Unlimited`` amount: a quota too large for int64 saturates here.
UNLIMITED = 2**63 - 1

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL_SUFFIXES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


class QuantityError(ValueError):
    """A quantity that is not valid Kubernetes Quantity syntax, or is out of range."""


def is_milli_resource(resource: str) -> bool:
    """Whether ``resource`` is counted in thousandths (only ``cpu``, as in Kueue)."""
    return resource == "cpu"


def parse_decimal(value: str | int | float) -> Decimal:
    """Parse a Kubernetes Quantity (``500m``, ``36Gi``, ``1.5``, ``2e3``) to an exact Decimal.

    Raises QuantityError for anything that is not a finite Quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    text = value if isinstance(value, str) else repr(value)
    if not text or text.strip() != text:
        raise QuantityError(f"{value!r} is not a quantity")
    try:
        # Floats go through their shortest repr so YAML's 1.5 is exactly 1.5.
        number = parse_quantity(text)
    except (ValueError, InvalidOperation, TypeError) as err:
        raise QuantityError(f"{value!r} is not a quantity") from err
    if not number.is_finite():
        raise QuantityError(f"{value!r} is not a finite quantity")
    return Decimal(number)


def to_amount(resource: str, value: str | int | float, *, allow_negative: bool = False) -> int:
    """Convert a quantity of ``resource`` to Kueue's integer amount.

    CPU becomes millicores, every other resource whole units (memory: bytes), rounded
    up as Kubernetes' ``MilliValue()``/``Value()`` do. Amounts beyond int64 saturate at
    UNLIMITED. Raises QuantityError for bad syntax, or for a negative value unless
    ``allow_negative``.
    """
    number = parse_decimal(value)
    if number < 0 and not allow_negative:
        raise QuantityError(f"{value!r} must not be negative")
    scaled = number * 1000 if is_milli_resource(resource) else number
    amount = math.ceil(scaled)
    return max(min(amount, UNLIMITED), -UNLIMITED - 1)


def format_amount(resource: str, amount: int) -> str:
    """Format an amount back as a short Kubernetes Quantity string (``500m``, ``3``, ``200Mi``).

    The inverse of :func:`to_amount` for display; CPU amounts are millicores.
    """
    if amount == UNLIMITED:
        return "unlimited"
    if is_milli_resource(resource):
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if amount == 0:
        return "0"
    for suffix, factor in _BINARY_SUFFIXES:
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    for suffix, factor in _DECIMAL_SUFFIXES:
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
