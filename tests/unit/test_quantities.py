"""Kubernetes quantities become exact integer amounts (SEMANTICS §0.1)."""

from decimal import ROUND_UP, Context, Decimal, localcontext

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kueue_es.events import quantities
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


# -- the grammar, against Kubernetes ----------------------------------------------------------------

VALID = [
    "0",
    "1",
    "+1",
    "-1",
    "007",
    "1.",
    ".5",
    "-.5",
    "1.5",
    "0.001",
    "123456789012345678901234567890",
    "1n",
    "1u",
    "1m",
    "1k",
    "1M",
    "1G",
    "1T",
    "1P",
    "1E",
    "-2m",
    "1.5k",
    "0.1n",
    "1Ki",
    "1Mi",
    "1Gi",
    "1Ti",
    "1Pi",
    "1Ei",
    "1.5Gi",
    "-3Mi",
    ".5Ki",
    "1e3",
    "1E3",
    "1e-3",
    "1e+3",
    "1.5e2",
    "-2.5E-4",
    "12e2",
    "5e0",
]


@pytest.mark.parametrize("text", VALID)
def test_parse_matches_the_kubernetes_client(text: str) -> None:
    """For every valid Quantity our parser gives exactly the value kubernetes.utils.quantity.parse_quantity gives."""
    from kubernetes.utils.quantity import parse_quantity

    with localcontext(Context(prec=100)):  # the client multiplies in the current context: 28 digits by default
        assert quantities.parse_decimal(text) == parse_quantity(text)


@pytest.mark.parametrize(
    "text",
    [
        "1K",  # decimal kilo is lower-case k (the Python client takes K)
        "1ki",
        "1mi",
        "1ni",
        "1ui",  # binary suffixes are Ki..Ei only
        "1e",
        "1e3k",
        "1e1.5",
        "1Ki5",
        "k",
        "Ki",
        "",
        "-",
        "+",
        ".",
        "1..5",
        "1 ",
        " 1",
        "1\n",
        "1_000",
        "0x10",
        "NaN",
        "Infinity",
        "-inf",
        "١",  # what Decimal() reads and Kubernetes does not
        "1Z",
        "1Y",
        "1 Gi",
    ],
)
def test_parse_rejects_what_kubernetes_rejects(text: str) -> None:
    """ParseQuantity's grammar: anything else is a QuantityError naming the value."""
    with pytest.raises(QuantityError, match="quantity"):
        quantities.parse(text)


@pytest.mark.parametrize(
    ("value", "want_number", "want_format"),
    [
        ("500m", Decimal("0.5"), quantities.Format.DECIMAL_SI),
        ("2", Decimal(2), quantities.Format.DECIMAL_SI),
        ("1Mi", Decimal(2**20), quantities.Format.BINARY_SI),
        ("1e3", Decimal(1000), quantities.Format.DECIMAL_EXPONENT),
        (3, Decimal(3), quantities.Format.DECIMAL_SI),
        (0.25, Decimal("0.25"), quantities.Format.DECIMAL_SI),
        (1e20, Decimal("1e20"), quantities.Format.DECIMAL_EXPONENT),  # repr(1e20) is '1e+20'
    ],
)
def test_parse_keeps_the_format_the_suffix_chose(
    value: str | int | float, want_number: Decimal, want_format: object
) -> None:
    """The suffix decides how the quantity is written back (resource.Format); ints and floats read as written."""
    assert quantities.parse(value) == quantities.Quantity(number=want_number, format=want_format)  # type: ignore[arg-type]


# -- writing, as resource.Quantity.String() ---------------------------------------------------------


@pytest.mark.parametrize(
    ("quantity", "want"),
    [
        ("1", "1"),
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("0.1Ki", "102400m"),  # binary but not whole: DecimalSI
        ("1023Ki", "1023Ki"),
        ("512", "512"),
        ("100Mi", "100Mi"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1e3", "1e3"),
        ("12e2", "1200"),
        ("1.5e-3", "1500e-6"),
        ("0.0000000001", "1n"),  # below a nano: rounded up
        ("-0.0000000001", "-1n"),  # away from zero, as inf.RoundUp
        ("0", "0"),
        ("0Gi", "0"),
        ("-1Ki", "-1Ki"),
        ("-1500m", "-1500m"),
        ("1E", "1E"),
        ("100u", "100u"),
    ],
)
def test_canonical_is_what_kubernetes_writes(quantity: str, want: str) -> None:
    """k8s.io/apimachinery resource.Quantity String(): the format kept, the largest exact suffix."""
    assert quantities.canonical(quantity) == want


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 3000, "3"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        ("memory", 200 * 2**20, "200Mi"),
        ("memory", 1000, "1k"),  # below 1024: DecimalSI
        ("memory", 10**9, "1000000000"),  # BinarySI that no power of 1024 divides
        ("ephemeral-storage", 2**30, "1Gi"),
        ("hugepages-1Gi", 2 * 2**30, "2Gi"),
        ("pods", 1024, "1024"),
        ("pods", 3000, "3k"),
        ("nvidia.com/gpu", 2, "2"),
    ],
)
def test_to_quantity_writes_what_kueue_writes(resource: str, amount: int, want: str) -> None:
    """Amounts become the Quantity Kueue builds (ResourceFormatter): milli CPU, binary memory, decimal the rest."""
    assert quantities.to_quantity(resource, amount) == want


# -- properties ------------------------------------------------------------------------------------

RESOURCES = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage", "hugepages-2Mi"])
AMOUNTS = st.integers(min_value=-(2**62), max_value=2**62)
SUFFIXES = st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])


@st.composite
def quantity_texts(draw: st.DrawFn) -> str:
    """Valid Quantity strings: a sign, digits around an optional point, a suffix or an exponent."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.from_regex(r"[0-9]{0,12}", fullmatch=True))
    fraction = draw(st.from_regex(r"[0-9]{0,12}", fullmatch=True))
    number = f"{whole}.{fraction}" if whole and draw(st.booleans()) else whole or f".{fraction or '5'}"
    if draw(st.booleans()):
        return f"{sign}{number}{draw(SUFFIXES)}"
    return f"{sign}{number}{draw(st.sampled_from(['e', 'E']))}{draw(st.integers(min_value=-20, max_value=20))}"


@given(resource=RESOURCES, amount=AMOUNTS)
def test_an_amount_written_reads_back_the_same(resource: str, amount: int) -> None:
    """to_amount(to_quantity(a)) == a: what the dispatcher writes, the watcher reads back unchanged."""
    assert quantities.to_amount(resource, quantities.to_quantity(resource, amount), allow_negative=True) == amount


@given(resource=RESOURCES, amount=AMOUNTS)
def test_an_amount_displayed_reads_back_the_same(resource: str, amount: int) -> None:
    """format_amount is exact too (for every amount but the saturated Unlimited)."""
    assert quantities.to_amount(resource, format_amount(resource, amount), allow_negative=True) == amount


@given(text=quantity_texts())
def test_parse_agrees_with_the_kubernetes_client(text: str) -> None:
    """Any valid Quantity parses to the exact value the Kubernetes client library gives."""
    from kubernetes.utils.quantity import parse_quantity

    with localcontext(Context(prec=100)):  # the client multiplies in the current context: 28 digits by default
        assert quantities.parse_decimal(text) == parse_quantity(text)


@given(text=quantity_texts())
def test_canonical_is_a_fixed_point_of_the_same_value(text: str) -> None:
    """The canonical form parses back to the (nano-rounded) value, in the same format, and is its own canonical form."""
    parsed = quantities.parse(text)
    written = quantities.canonical(text)
    again = quantities.parse(written)
    with localcontext(Context(prec=100)):
        nano = parsed.number.quantize(Decimal("1e-9"), rounding=ROUND_UP)
    assert again.number == nano
    assert quantities.canonical(written) == written
