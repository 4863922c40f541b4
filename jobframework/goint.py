"""Go's integer parsing and sizes, as Kueue reads the numbers in its labels and annotations.

Why this module exists: Kueue reads a number written in a label or an annotation with Go's
``strconv.Atoi`` (the 64 bits of its platform) or ``strconv.ParseInt(s, 10, 32)``, refuses what they
refuse with their words (``strconv.Atoi: parsing "99999999999999999999": value out of range``), and
then often keeps the value in an ``int32`` field, which wraps. The webhooks answer with the same words,
the converters refuse the same values, and nothing that reads a number from an object builds an event
the codec cannot carry (an integer beyond 64 bits: :data:`kueue_es.events.codec.INT64_MAX`). Pure.
"""

from __future__ import annotations

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
"""The range of a Go ``int32`` (a Kubernetes count, replicas, parallelism, priority, seconds)."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of a Go ``int`` on a 64-bit platform, and of an ``int64``."""


class GoNumError(ValueError):
    """Go's ``*strconv.NumError``: ``str(err)`` is its ``Error()`` text; ``out_of_range`` tells ``ErrRange`` from
    ``ErrSyntax``."""

    def __init__(self, func: str, text: str, *, out_of_range: bool) -> None:
        self.out_of_range = out_of_range
        why = "value out of range" if out_of_range else "invalid syntax"
        super().__init__(f"strconv.{func}: parsing {go_quote(text)}: {why}")


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: double quotes, with ``"`` and ``\\`` escaped, the usual control escapes, and
    ``\\x``, ``\\u`` or ``\\U`` for any other character that is not printable."""
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    out = []
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char in named:
            out.append(named[char])
        elif char == " " or char.isprintable():
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def parse_int(text: str, *, bits: int = 64, func: str = "ParseInt") -> int:
    """Go's ``strconv.ParseInt(text, 10, bits)``: an optional sign and decimal digits (no underscores, no
    spaces); raises :class:`GoNumError` as Go does, with ``func`` as the function it names. A digit that
    takes the value beyond the range is reported as out of range even when a bad character follows it, as
    Go reports the first problem it meets."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    negative = text[:1] == "-"
    if not digits:
        raise GoNumError(func, text, out_of_range=False)
    limit = 2 ** (bits - 1)  # the cutoff of the magnitude: its maximum is limit - 1, or limit when negative
    value = 0
    for char in digits:
        if not "0" <= char <= "9":
            raise GoNumError(func, text, out_of_range=False)
        value = value * 10 + (ord(char) - 48)
        if value >= 2**bits:  # ParseUint's own overflow (at the same size), met before any later character
            raise GoNumError(func, text, out_of_range=True)
    if value > limit or (value == limit and not negative):
        raise GoNumError(func, text, out_of_range=True)
    return -value if negative else value


def atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` on a 64-bit platform (``ParseInt(text, 10, 0)``, its errors naming ``Atoi``)."""
    return parse_int(text, bits=64, func="Atoi")


def int32(value: int) -> int:
    """Go's conversion ``int32(value)`` of an integer: its low 32 bits, wrapped into the int32 range."""
    return (value - INT32_MIN) % 2**32 + INT32_MIN
