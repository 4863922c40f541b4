"""Kubernetes quantities become exact integer amounts (SEMANTICS §0.1)."""

import pytest

from kueue_es.events.quantities import UNLIMITED, QuantityError, format_amount, to_amount


@pytest.mark.parametrize(
    ("resource", "quantity", "want"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1", 1000),
        ("cpu", 9, 9000),
        ("cpu", "1.5", 1500),
        ("cpu", 1.5, 1500),
        ("cpu", "2e3", 2_000_000),
        ("cpu", "0.1m", 1),  # rounded up, as MilliValue() does
        ("cpu", "100k", 100_000_000),
        ("memory", "36Gi", 36 * 2**30),
        ("memory", "200Mi", 200 * 2**20),
        ("memory", "1G", 10**9),
        ("memory", "1.5", 2),  # Value() rounds up
        ("memory", "1Ki", 1024),
        ("nvidia.com/gpu", "4", 4),
        ("pods", 10, 10),
        ("cpu", "1E", UNLIMITED),  # beyond int64: Kueue's Unlimited
    ],
)
def test_quantity_to_amount(resource: str, quantity: str | int | float, want: int) -> None:
    """Each quantity converts to the amount Kubernetes' MilliValue()/Value() gives."""
    assert to_amount(resource, quantity) == want


@pytest.mark.parametrize("quantity", ["NaN", "abc", "1.5.5", "", " 1", "1 ", "Inf", True, "12XYZ"])
def test_bad_quantity_is_an_error(quantity: object) -> None:
    """Anything that is not a finite Quantity raises QuantityError naming the value."""
    with pytest.raises(QuantityError, match="quantity"):
        to_amount("cpu", quantity)  # type: ignore[arg-type]


def test_negative_only_when_allowed() -> None:
    """Quota may not be negative; requests may (and are floored later)."""
    with pytest.raises(QuantityError, match="negative"):
        to_amount("cpu", "-1")
    assert to_amount("cpu", "-1", allow_negative=True) == -1000


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 3000, "3"),
        ("memory", 200 * 2**20, "200Mi"),
        ("memory", 10**9, "1G"),
        ("memory", 7, "7"),
        ("pods", 0, "0"),
        ("cpu", UNLIMITED, "unlimited"),
    ],
)
def test_format_amount(resource: str, amount: int, want: str) -> None:
    """Amounts print back as the short Quantity a person would write."""
    assert format_amount(resource, amount) == want
