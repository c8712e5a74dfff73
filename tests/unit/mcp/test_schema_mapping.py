"""An MCP tool's JSON schema becomes XML parameters, or is refused with the reason."""

from decimal import Decimal

import pytest

from app.domain.errors import InvalidParameterError
from app.mcp.schema import SchemaRefused, map_input_schema, to_arguments
from app.tools.spec import ParamType


def test_plain_types_map_to_xml_parameters_with_bounds_and_required_flags():
    params = map_input_schema({
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name", "maxLength": 50},
            "days": {"type": "integer", "minimum": 1, "maximum": 14},
            "ratio": {"type": "number", "minimum": 0.5},
            "metric": {"type": "boolean", "default": True},
            "unit": {"enum": ["C", "F"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "filters": {"type": "object"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["city", "days", "note"],
    })
    by_name = {p.spec.name: p for p in params}
    assert by_name["city"].spec.type is ParamType.STRING and by_name["city"].spec.required
    assert by_name["city"].spec.max_length == 50
    assert (by_name["days"].spec.minimum, by_name["days"].spec.maximum) == (1, 14)
    assert by_name["ratio"].spec.type is ParamType.DECIMAL
    assert by_name["ratio"].spec.minimum == Decimal("0.5")
    assert by_name["metric"].spec.default is True
    assert by_name["unit"].spec.choices == ("C", "F")
    assert by_name["tags"].json_type == "array" and "JSON array" in by_name["tags"].spec.description
    assert by_name["filters"].spec.type is ParamType.JSON_OBJECT
    assert not by_name["note"].spec.required, "a nullable parameter is optional"


def test_fractional_bounds_of_an_integer_keep_to_the_whole_numbers_within_them():
    params = map_input_schema({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 1.5, "maximum": 9.5},
        "m": {"type": "integer", "minimum": -2.5, "maximum": -0.5}}})
    by_name = {p.spec.name: p.spec for p in params}
    assert (by_name["n"].minimum, by_name["n"].maximum) == (2, 9)
    assert (by_name["m"].minimum, by_name["m"].maximum) == (-2, -1)


@pytest.mark.parametrize(("schema", "reason"), [
    ({"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}}, "$ref"),
    ({"type": "object", "properties": {"x": {"oneOf": [{"type": "string"}]}}}, "oneOf"),
    ({"type": "object", "properties": {"bad name": {"type": "string"}}}, "XML element name"),
    ({"type": "object", "properties": {"xmlish": {"type": "string"}}}, "XML element name"),
    ({"type": "object", "properties": {"n": {"enum": [1, 2]}}}, "enum of strings"),
    ({"type": "object", "properties": {"n": {"type": ["string", "integer"]}}}, "several types"),
    ({"type": "array"}, "not object"),
    ({"type": "object", "required": ["ghost"]}, "not described"),
    ("nonsense", "not a JSON object"),
])
def test_what_cannot_be_mapped_is_refused_with_the_reason(schema, reason):
    with pytest.raises(SchemaRefused, match=reason.replace("$", r"\$")):
        map_input_schema(schema)


def test_typed_values_go_back_to_the_server_as_json_arguments():
    params = map_input_schema({"type": "object", "properties": {
        "n": {"type": "number"}, "k": {"type": "integer"}, "tags": {"type": "array"},
        "unused": {"type": "string"}}})
    arguments = to_arguments(params, {"n": Decimal("2.50"), "k": 3, "tags": '["a", 1]',
                                      "unused": None})
    assert arguments == {"n": 2.5, "k": 3, "tags": ["a", 1]}
    assert to_arguments(params, {"n": Decimal(4)}) == {"n": 4}
    with pytest.raises(InvalidParameterError, match="JSON array"):
        to_arguments(params, {"tags": "{not a list}"})
