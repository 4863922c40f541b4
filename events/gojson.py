"""Go's ``encoding/json`` ``Unmarshal`` into a slice of flat structs, with Go's error texts.

Why this module exists: Kueue reads a few annotations by unmarshalling their JSON with Go's encoding/json
(the multi-layer slice constraints, ``kueue.x-k8s.io/podset-slice-required-topology-constraints``) and its
webhooks quote Go's error in their refusal (``must be a valid JSON array: invalid character 'o' in literal
null (expecting 'u')``). Go also reads what Python's json module reads differently: keys match struct fields
case-insensitively, unknown keys are ignored, ``null`` leaves a field as it is, and a number must fit the
field's integer type. :func:`decode_struct_list` does what ``json.Unmarshal`` does for such a slice and
raises :class:`GoJSONError` with the text of Go's error. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_MAX_DEPTH: Final = 10000
"""encoding/json scanner.go maxNestingDepth."""
_SPACE: Final = frozenset(b" \t\r\n")
_DIGITS: Final = frozenset(b"0123456789")
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES: Final = frozenset(b'bfnrt\\/"')

FieldType = Literal["string", "int32"]
"""The Go types a struct field may have here."""


class GoJSONError(ValueError):
    """Go's ``json.Unmarshal`` error: ``str(err)`` is its ``Error()`` text."""


def _quote_char(byte: int) -> str:
    """encoding/json quoteChar: a byte in single quotes, as Go's strconv.Quote of ``string(rune(byte))``."""
    if byte == ord("'"):
        return "'\\''"
    if byte == ord('"'):
        return "'\"'"
    char = chr(byte)
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    if char == "\\":
        return "'\\\\'"
    if char in named:
        return f"'{named[char]}'"
    if char == " " or char.isprintable():
        return f"'{char}'"
    return f"'\\x{byte:02x}'" if byte < 0x80 else f"'\\u{byte:04x}'"


def check_valid(data: bytes) -> None:
    """encoding/json checkValid: raises :class:`GoJSONError` with the scanner's SyntaxError text
    (``invalid character 'x' looking for beginning of value``, ``unexpected end of JSON input``) for
    ``data`` that is not one JSON value. At the end of the input Go's scanner steps one more space, so a
    literal cut short is an invalid ``' '`` (``invalid character ' ' in literal true (expecting 'e')``)."""
    scanner = _Scanner()
    for byte in data:
        scanner.step(byte)
    scanner.step(ord(" "))
    if scanner.state != "top":
        raise GoJSONError("unexpected end of JSON input")


class _Scanner:
    """The states of Go's JSON scanner: ``state`` names where the next byte goes, ``stack`` what each open
    container expects next (``key`` or ``value`` of an object, ``element`` of an array)."""

    def __init__(self) -> None:
        self.state = "begin"
        self.stack: list[str] = []
        self.word = ""  # the literal (true, false, null) being read
        self.rest = ""  # what of it, or of a \\u escape's four digits, is still expected

    def step(self, byte: int) -> None:
        """Reads one byte; raises :class:`GoJSONError` at the first one that cannot come there."""
        while not self._read(byte):  # a state may hand the same byte on to the next one
            pass

    def _fail(self, byte: int, context: str) -> GoJSONError:
        return GoJSONError(f"invalid character {_quote_char(byte)} {context}")

    def _read(self, byte: int) -> bool:
        """One state's reading of ``byte``: True when it took it, False when it handed it on."""
        state = self.state
        if state in ("begin", "begin_or_empty", "key_or_empty", "key"):
            return self._begin(byte)
        if state == "string":
            if byte == ord('"'):
                self.state = "end"
            elif byte == ord("\\"):
                self.state = "escape"
            elif byte < 0x20:
                raise self._fail(byte, "in string literal")
            return True
        if state == "escape":
            if byte == ord("u"):
                self.state, self.rest = "hex", "xxxx"
            elif byte in _ESCAPES:
                self.state = "string"
            else:
                raise self._fail(byte, "in string escape code")
            return True
        if state == "hex":
            if byte not in _HEX:
                raise self._fail(byte, "in \\u hexadecimal character escape")
            self.rest = self.rest[1:]
            self.state = "hex" if self.rest else "string"
            return True
        if state == "literal":
            if byte != ord(self.rest[0]):
                raise self._fail(byte, f"in literal {self.word} (expecting '{self.rest[0]}')")
            self.rest = self.rest[1:]
            self.state = "literal" if self.rest else "end"
            return True
        if state in ("neg", "int", "zero", "dot", "frac", "e", "e_sign", "exp"):
            return self._number(byte)
        if state == "end":
            return self._after_value(byte)
        if byte not in _SPACE:  # "top": only space may follow the value
            raise self._fail(byte, "after top-level value")
        return True

    def _begin(self, byte: int) -> bool:
        """Where a value, or an object's key, may begin (or a container may close empty)."""
        if byte in _SPACE:
            return True
        if self.state == "begin_or_empty" and byte == ord("]"):
            self.state = "end"
            return False
        if self.state == "key_or_empty" and byte == ord("}"):
            self.stack[-1], self.state = "value", "end"
            return False
        if self.state in ("key_or_empty", "key"):
            if byte != ord('"'):
                raise self._fail(byte, "looking for beginning of object key string")
            self.state = "string"
        elif byte in (ord("{"), ord("[")):
            if len(self.stack) >= _MAX_DEPTH:
                raise GoJSONError("exceeded max depth")
            self.stack.append("key" if byte == ord("{") else "element")
            self.state = "key_or_empty" if byte == ord("{") else "begin_or_empty"
        elif byte == ord('"'):
            self.state = "string"
        elif byte == ord("-"):
            self.state = "neg"
        elif byte in _DIGITS:
            self.state = "zero" if byte == ord("0") else "int"
        elif byte in b"tfn":
            self.word = {ord("t"): "true", ord("f"): "false", ord("n"): "null"}[byte]
            self.state, self.rest = "literal", self.word[1:]
        else:
            raise self._fail(byte, "looking for beginning of value")
        return True

    def _number(self, byte: int) -> bool:
        """Inside a number: sign, integer part, fraction, exponent."""
        state, digit = self.state, byte in _DIGITS
        if state == "neg":
            if not digit:
                raise self._fail(byte, "in numeric literal")
            self.state = "zero" if byte == ord("0") else "int"
        elif state in ("int", "frac", "exp") and digit:
            pass
        elif state in ("int", "zero", "frac") and byte in b"eE":
            self.state = "e"
        elif state in ("int", "zero") and byte == ord("."):
            self.state = "dot"
        elif state == "dot":
            if not digit:
                raise self._fail(byte, "after decimal point in numeric literal")
            self.state = "frac"
        elif state == "e" and byte in b"+-":
            self.state = "e_sign"
        elif state in ("e", "e_sign"):
            if not digit:
                raise self._fail(byte, "in exponent of numeric literal")
            self.state = "exp"
        else:
            self.state = "end"
            return False
        return True

    def _after_value(self, byte: int) -> bool:
        """After a value: what its container takes next, or the end of the top-level value."""
        if not self.stack:
            self.state = "top"
            return False
        if byte in _SPACE:
            return True
        expects = self.stack[-1]
        if expects == "key":
            if byte != ord(":"):
                raise self._fail(byte, "after object key")
            self.stack[-1], self.state = "value", "begin"
        elif byte == ord(","):
            self.state = "key" if expects == "value" else "begin"
            if expects == "value":
                self.stack[-1] = "key"
        elif byte == (ord("}") if expects == "value" else ord("]")):
            self.stack.pop()
            self.state = "end" if self.stack else "top"
        else:
            raise self._fail(byte, "after object key:value pair" if expects == "value" else "after array element")
        return True


class _Number(str):
    """A JSON number as written (Go reads the literal, and quotes it in its errors)."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs in order (Go decodes a repeated key twice, the last winning)."""


def _kind(value: Any) -> str:
    """The JSON kind Go names in an UnmarshalTypeError."""
    if isinstance(value, _Number):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "object" if isinstance(value, _Object) else "array"


def _fold(key: str) -> str:
    """encoding/json foldName: ASCII letters upper-cased, any other rune the smallest of its case-fold set."""
    out = []
    for char in key:
        if char < "\x80":
            out.append(char.upper())
            continue
        orbit = {char, char.upper(), char.lower(), char.upper().lower(), char.lower().upper()}
        out.append(min(c for c in orbit if len(c) == 1))
    return "".join(out)


def decode_struct_list(
    text: str, *, struct: str, package: str, fields: Mapping[str, FieldType]
) -> list[dict[str, Any]]:
    """``json.Unmarshal(text, &[]package.struct{...})`` for a struct of ``fields`` (JSON name -> Go type):
    each decoded struct as a dict of every field (zero values for the missing ones); ``null`` decodes to an
    empty list. Raises :class:`GoJSONError` with Go's text: the scanner's syntax error, else the first
    ``json: cannot unmarshal ... into Go ...`` type error (Go decodes on past one and reports the first). Input
    nested deeper than Python's json module reads (about a thousand levels) is refused with Go's ``exceeded max
    depth``, which Go says only beyond 10000."""
    check_valid(text.encode("utf-8", "surrogatepass"))
    try:
        raw = json.loads(text, parse_int=_Number, parse_float=_Number, object_pairs_hook=_Object)
    except RecursionError:  # nested deeper than Python reads (Go reads to 10000 levels): refused all the same
        raise GoJSONError("exceeded max depth") from None
    by_fold = {_fold(name): name for name in fields}
    errors: list[str] = []

    def mismatch(value: Any, go_type: str, field: str | None = None, *, literal: bool = False) -> None:
        what = f"number {value}" if literal else _kind(value)
        into = f"Go struct field {struct}.{field}" if field else "Go value"
        errors.append(f"json: cannot unmarshal {what} into {into} of type {go_type}")

    if raw is None:
        return []
    if not isinstance(raw, list) or isinstance(raw, _Object):
        mismatch(raw, f"[]{package}.{struct}")
        raise GoJSONError(errors[0])
    decoded = []
    for element in raw:
        values: dict[str, Any] = {name: "" if go_type == "string" else 0 for name, go_type in fields.items()}
        if isinstance(element, _Object):
            for key, value in element:
                name = key if key in fields else by_fold.get(_fold(key))
                if name is not None and value is not None:  # an unknown key is skipped, null changes nothing
                    _store(values, name, fields[name], value, mismatch)
        elif element is not None:
            mismatch(element, f"{package}.{struct}")
        decoded.append(values)
    if errors:
        raise GoJSONError(errors[0])
    return decoded


def _store(values: dict[str, Any], name: str, go_type: FieldType, value: Any, mismatch: Any) -> None:
    """Sets field ``name`` of Go type ``go_type`` from a JSON value, or reports the mismatch as Go does."""
    if go_type == "string":
        if isinstance(value, str) and not isinstance(value, _Number):
            values[name] = value
        else:
            mismatch(value, go_type, name)
    elif not isinstance(value, _Number):
        mismatch(value, go_type, name)
    elif (number := _go_int(value)) is None or not _INT32_MIN <= number <= _INT32_MAX:
        mismatch(value, go_type, name, literal=True)  # strconv.ParseInt(literal, 10, 64), then int32 overflow
    else:
        values[name] = number


def _go_int(literal: str) -> int | None:
    """strconv.ParseInt(literal, 10, 64): an integer literal within 64 bits, else None."""
    digits = literal.removeprefix("-")
    if not digits.isascii() or not digits.isdigit():
        return None
    value = int(literal)
    return value if -(2**63) <= value < 2**63 else None
