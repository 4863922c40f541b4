"""CEL device selectors, compiled and matched against the devices ResourceSlices publish.

Why this module exists: before it charges a ResourceClaimTemplate, Kueue compiles the CEL
selectors of each device request and refuses a workload whose expression does not compile, and
it counts the cluster's devices that match a request's selectors together with its DeviceClass's:
fewer than the request's ``count`` refuses the workload too (SEMANTICS-ADVANCED F; Kueue pkg/dra
claims.go validateCELSelectors, validateCELSelectorsAgainstDevices). The device an expression
reads is the one Kubernetes' DRA CEL environment gives it (k8s.io/dynamic-resource-allocation/cel):
``device.driver``, ``device.attributes[domain].<id>`` (int, bool, string or semver), and
``device.capacity[domain].<id>`` (a quantity); an unknown domain is an empty map, an unknown
attribute an evaluation error. The expressions run in cel-python (a pure interpreter), with the
Kubernetes CEL ``quantity`` and ``semver`` libraries' functions selectors use.

Pure: compiled programs are remembered per expression text (the same text always compiles the
same way), nothing else is kept.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import celpy
from celpy import celtypes

from kueue_es.events import models, quantities


@dataclass(frozen=True)
class Compiled:
    """One selector's expression compiled: ``program`` to run, or ``error``, the compiler's message."""

    expression: str
    program: Any = None
    error: str = ""


class EvaluationError(Exception):
    """A selector that failed on a device (an unknown field, a type error, a non-boolean result)."""


@functools.total_ordering
class Quantity:
    """A Kubernetes CEL ``quantity`` value (its exact decimal value)."""

    def __init__(self, value: Decimal) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)


@functools.total_ordering
class Semver:
    """A Kubernetes CEL ``semver`` value: ``major.minor.patch`` (a pre-release orders before its release)."""

    def __init__(self, text: str) -> None:
        core, _, pre = str(text).partition("-")
        core = core.partition("+")[0]
        parts = core.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise EvaluationError(f"invalid semver: {text}")
        self.key = (int(parts[0]), int(parts[1]), int(parts[2]), 0 if pre else 1, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.key == other.key

    def __lt__(self, other: Semver) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map (as in Kubernetes)."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(quantities.parse_decimal(str(text)))
    except quantities.QuantityError as err:
        raise EvaluationError(f"invalid quantity: {text}") from err


def _compare(a: Any, b: Any) -> celtypes.IntType:
    if type(a) is not type(b) or not isinstance(a, Quantity | Semver):
        raise EvaluationError(f"compareTo: no such overload for {type(a).__name__}, {type(b).__name__}")
    return celtypes.IntType(0 if a == b else (-1 if a < b else 1))


def _greater(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) > 0)


def _less(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) < 0)


def _as_integer(q: Any) -> celtypes.IntType:
    if not isinstance(q, Quantity) or q.value != q.value.to_integral_value():
        raise EvaluationError("asInteger: quantity is not an integer")
    return celtypes.IntType(int(q.value))


def _version_part(index: int) -> Callable[[Any], celtypes.IntType]:
    def part(v: Any) -> celtypes.IntType:
        if not isinstance(v, Semver):
            raise EvaluationError("no such overload")
        return celtypes.IntType(v.key[index])

    return part


def _is(parse: Callable[[Any], Any]) -> Callable[[Any], celtypes.BoolType]:
    def check(text: Any) -> celtypes.BoolType:
        try:
            parse(text)
        except EvaluationError:
            return celtypes.BoolType(False)
        return celtypes.BoolType(True)

    return check


#: The Kubernetes CEL library functions a device selector may call (member calls ``a.f(b)`` are ``f(a, b)``).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is(_quantity),
    "semver": Semver,
    "isSemver": _is(Semver),
    "compareTo": _compare,
    "isGreaterThan": _greater,
    "isLessThan": _less,
    "asInteger": _as_integer,
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
}


@functools.cache
def _env() -> celpy.Environment:
    """The CEL environment, made on first use: building its parser takes about 0.1 s, which every process
    importing the scheduling library paid at start-up, DRA or not."""
    return celpy.Environment()


@functools.lru_cache(maxsize=256)
def compile_selector(expression: str) -> Compiled:
    """``expression`` compiled (Kueue's CEL cache holds 256 too); a syntax error is the result's ``error``."""
    env = _env()
    try:
        ast = env.compile(expression)
    except celpy.CELParseError as err:
        return Compiled(expression=expression, error=_first_line(err))
    return Compiled(expression=expression, program=env.program(ast, functions=FUNCTIONS))


def _first_line(err: Exception) -> str:
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    return f"ERROR: <input>: Syntax error: {text}" if text else "ERROR: <input>: Syntax error"


@dataclass(frozen=True)
class Device:
    """A device as selectors see it: its driver and its CEL ``device`` value; ``source`` the device as published."""

    driver: str
    value: celtypes.MapType
    source: models.SliceDevice


def devices(slices: Iterable[models.ResourceSlice]) -> list[Device]:
    """Every device of ``slices`` (in slice-name order, then as each slice lists them) as selectors see it."""
    out = []
    for slc in sorted(slices, key=lambda s: s.metadata.name):
        for dev in slc.devices:
            out.append(Device(driver=slc.driver, value=_device_value(slc.driver, dev), source=dev))
    return out


def pool_devices(slices: Iterable[models.ResourceSlice], driver: str) -> list[Device]:
    """The devices of ``driver`` in its complete pools: per pool the slices of the newest generation, a
    pool counted only when it has all ``resourceSliceCount`` of them (Kueue counters.go groupSlicesByPool)."""
    pools: dict[str, list[models.ResourceSlice]] = {}
    for slc in sorted(slices, key=lambda s: s.metadata.name):
        if slc.driver != driver:
            continue
        have = pools.get(slc.pool)
        if have is None or slc.pool_generation > have[0].pool_generation:
            pools[slc.pool] = [slc]
        elif slc.pool_generation == have[0].pool_generation:
            have.append(slc)
    complete = [s for pool in sorted(pools) if len(pools[pool]) == pools[pool][0].pool_slice_count for s in pools[pool]]
    return devices(complete)


def _device_value(driver: str, dev: models.SliceDevice) -> celtypes.MapType:
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in dev.attributes.items():
        domain, ident = _qualified(driver, name)
        attributes.setdefault(domain, {})[ident] = _attribute(attr)
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in dev.capacity.items():
        domain, ident = _qualified(driver, name)
        capacity.setdefault(domain, {})[ident] = Quantity(quantities.parse_decimal(amount))
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _domains(attributes),
            celtypes.StringType("capacity"): _domains(capacity),
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(False),
        }
    )


def _domains(grouped: dict[str, dict[str, Any]]) -> _Domains:
    return _Domains(
        {
            celtypes.StringType(domain): celtypes.MapType({celtypes.StringType(k): v for k, v in values.items()})
            for domain, values in grouped.items()
        }
    )


def _qualified(driver: str, name: str) -> tuple[str, str]:
    domain, slash, ident = name.rpartition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(attr: models.DeviceAttribute) -> Any:
    if attr.int_value is not None:
        return celtypes.IntType(attr.int_value)
    if attr.bool_value is not None:
        return celtypes.BoolType(attr.bool_value)
    if attr.version_value is not None:
        try:
            return Semver(attr.version_value)
        except EvaluationError:
            return celtypes.StringType(attr.version_value)
    return celtypes.StringType(attr.string_value or "")


def matches(selectors: Iterable[Compiled], device: Device) -> bool:
    """Whether every compiled selector is true for ``device``; raises :class:`EvaluationError` for the
    first that fails to evaluate or gives no boolean."""
    for selector in selectors:
        try:
            result = selector.program.evaluate({"device": device.value})
        except (celpy.CELEvalError, EvaluationError, KeyError, TypeError, ValueError) as err:
            raise EvaluationError(_eval_message(err)) from err
        if isinstance(result, celpy.CELEvalError):
            raise EvaluationError(_eval_message(result))
        if not isinstance(result, celtypes.BoolType):
            raise EvaluationError(f"expression {selector.expression!r} did not evaluate to a boolean")
        if not result:
            return False
    return True


def _eval_message(err: BaseException) -> str:
    if isinstance(err, celpy.CELEvalError) and err.args:
        return str(err.args[0])
    return str(err)


def count_matching(
    found: Iterable[tuple[int, Device]],
    class_selectors: list[Compiled],
    request_selectors: list[Compiled],
    taken: set[int],
    needed: int,
) -> int:
    """How many devices of ``found`` (index, device) not in ``taken`` match the class's and the request's
    selectors, up to ``needed``; the matched indexes join ``taken`` (one device serves one request,
    Kueue claims.go countMatchingDevices). Raises :class:`EvaluationError`."""
    count = 0
    for index, device in found:
        if index in taken or not matches(class_selectors, device) or not matches(request_selectors, device):
            continue
        taken.add(index)
        count += 1
        if count >= needed:
            break
    return count


def indexed(found: list[Device]) -> Iterator[tuple[int, Device]]:
    """``found`` with each device's position."""
    return iter(enumerate(found))
