"""Kubernetes quantities: the one codec, from ``500m`` to exact integers and back.

Why this module exists: a quantity is read in three places (quota and requests in
the models, a pod's role hash, admission fair sharing weights) and written in two
(the Workload and ClusterQueue status, messages for people), and all of them must
agree with Kubernetes' ``resource.Quantity`` (k8s.io/apimachinery/pkg/api/resource
quantity.go). Here is the whole of it, with nothing imported but the standard
library:

- :func:`parse` reads the Quantity grammar (a sign, digits with an optional
  decimal point, then a binary suffix ``Ki``..``Ei``, a decimal suffix
  ``n u m k M G T P E``, or a decimal exponent ``e``/``E``) into an exact
  ``Decimal`` and the format the suffix chose; what Kubernetes rejects (``1K``,
  ``1mi``, ``1e3k``, spaces, ``NaN``) raises :class:`QuantityError`.
- :func:`to_amount` turns a quantity into Kueue's int64 "amount" (SEMANTICS §0.1,
  Kueue pkg/resources/amount.go): CPU through ``MilliValue()``, every other
  resource (memory in bytes, pods, GPUs) through ``Value()``, both rounded up.
- :func:`format_quantity` writes a value as ``Quantity.String()`` does
  (CanonicalizeBytes): :func:`canonical` for a quantity as written (``1024Mi`` is
  ``1Gi``), :func:`to_quantity` for an amount as Kueue builds it (``500m``,
  ``200Mi``).
- :func:`format_amount` prints an amount short, for people (``1G`` rather than
  ``1000000000``).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal, localcontext
from typing import Any

#: Kueue's ``Unlimited`` amount: a quota too large for int64 saturates here.
UNLIMITED = 2**63 - 1

_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL_SUFFIXES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))

_GRAMMAR = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|[eE](?P<exponent>[+-]?[0-9]+)|(?P<si>[numkMGTPE]?))"
)
_BINARY_POWER = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SI_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SI_SUFFIX = {exponent: suffix for suffix, exponent in _SI_EXPONENT.items()}
_BINARY_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NANO = Decimal("1e-9")
#: ParseQuantity reads a decimal exponent as an int32 (a larger one is not a suffix it knows).
_MAX_EXPONENT = 2**31 - 1
#: Resources Kueue writes as BinarySI (pkg/resources ResourceFormatter); CPU is milli DecimalSI, the rest DecimalSI.
_BINARY_RESOURCES = ("memory", "ephemeral-storage")


class QuantityError(ValueError):
    """A quantity that is not valid Kubernetes Quantity syntax, or is out of range."""


class Format(enum.Enum):
    """How a Quantity is written back (resource.Format): chosen by the suffix it was parsed with."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 1e3
    BINARY_SI = "BinarySI"  # 1Ki
    DECIMAL_SI = "DecimalSI"  # 1k, 500m, 2


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: its exact value and the format :func:`format_quantity` writes it in."""

    number: Decimal
    format: Format

    def __str__(self) -> str:
        return format_quantity(self.number, self.format)


def is_milli_resource(resource: str) -> bool:
    """Whether ``resource`` is counted in thousandths (only ``cpu``, as in Kueue)."""
    return resource == "cpu"


# -- reading --------------------------------------------------------------------------------------


def parse(value: str | int | float) -> Quantity:
    """Parse a Kubernetes Quantity (``500m``, ``36Gi``, ``1.5``, ``2e3``; ints and floats as written).

    The value is exact (as ``kubernetes.utils.quantity.parse_quantity`` gives it);
    Kubernetes' rounding to nano units happens when it is written
    (:func:`format_quantity`). Raises QuantityError for anything Kubernetes'
    ParseQuantity rejects.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{value!r} is not a quantity")
    # Floats go through their shortest repr so YAML's 1.5 is exactly 1.5.
    text = value if isinstance(value, str) else repr(value)
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity")
    number = Decimal(match["number"])
    with localcontext(_exact(number)):
        if match["binary"]:
            return Quantity(number=number * 2 ** _BINARY_POWER[match["binary"]], format=Format.BINARY_SI)
        if match["exponent"] is not None:
            exponent = int(match["exponent"])
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"{value!r} is not a quantity: its exponent is out of range")
            return Quantity(number=number.scaleb(exponent), format=Format.DECIMAL_EXPONENT)
        return Quantity(number=number.scaleb(_SI_EXPONENT[match["si"]]), format=Format.DECIMAL_SI)


def _exact(number: Decimal) -> Context:
    """A decimal context in which scaling ``number`` by a suffix, or to nano units, loses no digit
    (the default context keeps 28)."""
    digits = len(number.as_tuple().digits)
    return Context(prec=digits + abs(number.adjusted()) + 40, Emax=MAX_EMAX, Emin=MIN_EMIN)


def parse_decimal(value: str | int | float) -> Decimal:
    """The exact value of a Kubernetes Quantity; raises QuantityError for anything that is not one."""
    return parse(value).number


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


# -- writing as Kubernetes does -------------------------------------------------------------------


def format_quantity(number: Decimal, fmt: Format) -> str:
    """``number`` as ``resource.Quantity.String()`` writes it in format ``fmt`` (CanonicalizeBytes).

    Precision below ``1n`` is rounded up (away from zero), as ParseQuantity does.
    The number is written as an integer with the largest suffix that keeps it exact:
    BinarySI as a multiple of a power of 1024 (``1536Mi``), unless it is below 1024
    in size or not whole, which is written as DecimalSI; DecimalSI and
    DecimalExponent as a mantissa and an exponent that is a multiple of 3 (``500m``,
    ``1k``, ``1e3``); zero is ``0``.
    """
    if not number.is_finite():
        raise QuantityError(f"{number!r} is not a finite quantity")
    with localcontext(_exact(number)):
        return _format(number, fmt)


def _format(number: Decimal, fmt: Format) -> str:
    if number.as_tuple().exponent < -9:  # type: ignore[operator]  # finite: the exponent is an int
        number = number.quantize(_NANO, rounding=ROUND_UP)
    if number == 0:
        return "0"
    if fmt is Format.BINARY_SI:
        if -1024 < number < 1024 or number != number.to_integral_value():
            fmt = Format.DECIMAL_SI
        else:
            amount, power = int(number), 0
            while amount % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
                amount, power = amount // 1024, power + 1
            return f"{amount}{_BINARY_SUFFIX[power]}"
    sign, digits, exponent = number.normalize().as_tuple()
    mantissa = int("".join(map(str, digits))) * (-1 if sign else 1)
    exponent = int(exponent)
    base = exponent - exponent % 3
    mantissa *= 10 ** (exponent - base)
    if fmt is Format.DECIMAL_SI and base in _SI_SUFFIX:
        return f"{mantissa}{_SI_SUFFIX[base]}"
    return f"{mantissa}e{base}" if base else str(mantissa)


def canonical(value: str | int | float) -> str:
    """A quantity as written, in its canonical form (``1024Mi`` -> ``1Gi``, ``1000`` -> ``1k``, ``0.5`` -> ``500m``).

    The format of the input is kept (binary, decimal SI, or exponent), as Go's
    ``ParseQuantity(s).String()``. Raises QuantityError for what is not a quantity.
    """
    return str(parse(value))


_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
"""Every container list of a pod spec: each container's resources are quantities."""


def canonical_pod_spec(spec: MutableMapping[str, Any]) -> None:
    """Write every quantity of pod spec ``spec`` (in place) as a typed Kubernetes client and kube-apiserver
    encode a ``resource.Quantity`` (its String, :func:`canonical`): each container's (init and ephemeral too)
    requests and limits, the pod-level ``resources``, ``overhead``, each ``emptyDir.sizeLimit`` and each
    generic ephemeral volume's claim requests and limits. A value that is not a quantity is left as it is
    (for validation to refuse by its field). Canonical values are a fixed point."""
    holders: list[Any] = [spec.get("resources")]
    for group in _CONTAINER_LISTS:
        containers = spec.get(group)
        for container in containers if isinstance(containers, list) else ():
            if isinstance(container, MutableMapping):
                holders.append(container.get("resources"))
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, MutableMapping):
            continue
        empty_dir = volume.get("emptyDir")
        if isinstance(empty_dir, MutableMapping) and empty_dir.get("sizeLimit") is not None:
            empty_dir["sizeLimit"] = _canonical_or_as_is(empty_dir["sizeLimit"])
        claim = (((volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec")) or {}
        if isinstance(claim, MutableMapping):
            holders.append(claim.get("resources"))
    lists = [spec.get("overhead")]
    lists += [
        holder.get(part) for holder in holders if isinstance(holder, MutableMapping) for part in ("requests", "limits")
    ]
    for values in lists:
        if isinstance(values, MutableMapping):
            for name, value in list(values.items()):
                values[name] = _canonical_or_as_is(value)


def _canonical_or_as_is(value: Any) -> Any:
    """``value`` as a canonical quantity string, or as it is when it is not a quantity."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return value
    try:
        return canonical(value)
    except QuantityError:
        return value


def amount_quantity(resource: str, amount: int) -> Quantity:
    """The Quantity Kueue builds for an amount of ``resource`` (pkg/resources ResourceFormatter).

    CPU amounts are millicores (``NewMilliQuantity``, DecimalSI); memory,
    ephemeral-storage and hugepages-* are BinarySI; anything else DecimalSI.
    """
    if is_milli_resource(resource):
        return Quantity(number=Decimal(amount).scaleb(-3), format=Format.DECIMAL_SI)
    if resource in _BINARY_RESOURCES or resource.startswith("hugepages-"):
        return Quantity(number=Decimal(amount), format=Format.BINARY_SI)
    return Quantity(number=Decimal(amount), format=Format.DECIMAL_SI)


def to_quantity(resource: str, amount: int) -> str:
    """An amount as the canonical Kubernetes Quantity Kueue writes: ``500m``, ``3``, ``1500m``, ``200Mi``, ``1k``.

    The inverse of :func:`to_amount` for what goes back to the API server (status fields).
    """
    return str(amount_quantity(resource, amount))


# -- writing for people ---------------------------------------------------------------------------


def format_amount(resource: str, amount: int) -> str:
    """Format an amount back as a short Kubernetes Quantity string (``500m``, ``3``, ``200Mi``, ``1G``).

    The inverse of :func:`to_amount` for display (messages, timelines): the
    shortest exact form, binary suffixes first; CPU amounts are millicores. What is
    written to the API server is :func:`to_quantity`.
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
