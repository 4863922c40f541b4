"""Go's encoding/json as Kueue's webhooks quote it (kueue_es.events.gojson): the scanner's syntax errors and
json.Unmarshal's type errors into ``[]v1beta2.PodsetSliceRequiredTopologyConstraint``, read off Go's
encoding/json (scanner.go, decode.go)."""

from __future__ import annotations

import pytest

from kueue_es.events import gojson

LAYER = "PodsetSliceRequiredTopologyConstraint"
FIELDS: dict[str, gojson.FieldType] = {"topology": "string", "size": "int32"}


def decode(text: str) -> list[dict]:
    return gojson.decode_struct_list(text, struct=LAYER, package="v1beta2", fields=FIELDS)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("not json", "invalid character 'o' in literal null (expecting 'u')"),
        ("invalid-json", "invalid character 'i' looking for beginning of value"),
        ("", "unexpected end of JSON input"),
        ("[", "unexpected end of JSON input"),
        ('"abc', "unexpected end of JSON input"),
        # at the end Go's scanner steps one more space: a literal cut short is refused at that space
        ("tru", "invalid character ' ' in literal true (expecting 'e')"),
        ("-", "invalid character ' ' in numeric literal"),
        ("1.", "invalid character ' ' after decimal point in numeric literal"),
        ("1e+", "invalid character ' ' in exponent of numeric literal"),
        ("01", "invalid character '1' after top-level value"),
        ("[1,]", "invalid character ']' looking for beginning of value"),
        ("[1 2]", "invalid character '2' after array element"),
        ('[{"a" 1}]', "invalid character '1' after object key"),
        ('[{"a":1 "b":2}]', "invalid character '\"' after object key:value pair"),
        ("[{1:2}]", "invalid character '1' looking for beginning of object key string"),
        ('"\\q"', "invalid character 'q' in string escape code"),
        ('"\\u12"', "invalid character '\"' in \\u hexadecimal character escape"),
        ('"a\nb"', "invalid character '\\n' in string literal"),
        ("'a'", "invalid character '\\'' looking for beginning of value"),
        ("é", "invalid character 'Ã' looking for beginning of value"),  # Go quotes the first byte of é
        ("{}", f"json: cannot unmarshal object into Go value of type []v1beta2.{LAYER}"),
        ('"x"', f"json: cannot unmarshal string into Go value of type []v1beta2.{LAYER}"),
        ("[1]", f"json: cannot unmarshal number into Go value of type v1beta2.{LAYER}"),
        ("[[]]", f"json: cannot unmarshal array into Go value of type v1beta2.{LAYER}"),
        ('[{"size":"4"}]', f"json: cannot unmarshal string into Go struct field {LAYER}.size of type int32"),
        ('[{"size":1.5}]', f"json: cannot unmarshal number 1.5 into Go struct field {LAYER}.size of type int32"),
        ('[{"size":1e2}]', f"json: cannot unmarshal number 1e2 into Go struct field {LAYER}.size of type int32"),
        (
            '[{"size":2147483648}]',
            f"json: cannot unmarshal number 2147483648 into Go struct field {LAYER}.size of type int32",
        ),
        ('[{"size":true}]', f"json: cannot unmarshal bool into Go struct field {LAYER}.size of type int32"),
        ('[{"topology":5}]', f"json: cannot unmarshal number into Go struct field {LAYER}.topology of type string"),
        # Go decodes on past a type error and reports the first
        ('[{"size":"a","topology":1}]', f"json: cannot unmarshal string into Go struct field {LAYER}.size of type int32"),
    ],
)  # fmt: skip
def test_go_s_errors(text: str, error: str) -> None:
    with pytest.raises(gojson.GoJSONError) as err:
        decode(text)
    assert str(err.value) == error


def test_what_go_reads() -> None:
    """Keys match case-insensitively (Go's fold: ``ſ`` is an ``s``), unknown keys and nulls change nothing, the
    last of a repeated key wins, a missing field is its zero value, null is no layer at all."""
    assert decode('[{"Topology":"rack","SIZE":4,"note":[1,{}]}]') == [{"topology": "rack", "size": 4}]
    assert decode('[{"ſize":3,"size":null}]') == [{"topology": "", "size": 3}]
    assert decode('[{"size":3,"Size":5}, null, {}]') == [
        {"topology": "", "size": 5},
        {"topology": "", "size": 0},
        {"topology": "", "size": 0},
    ]
    assert decode(" null ") == [] and decode("[]") == []
    assert decode('[{"size":-0}]') == [{"topology": "", "size": 0}]
