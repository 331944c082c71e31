"""json_valid and json_schema: what they accept, where they find the JSON, and hostile input."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest
from grpo_rewards_json import extract_json_text, nesting_depth
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards import ConfigError, load_rewards, reward

PERSON = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": 1}', 1.0),
    ('  {"a": [1, 2, {"b": null}]}\n', 1.0),
    ('Here it is:\n```json\n{"a": 1}\n```\n', 1.0),
    ('```\n{"a": 1}\n```', 1.0),  # an unmarked fence
    ('```json\n{"a": 1}\n```\n```json\n{"a": \n```', 0.0),  # the last fence counts
    ('```json\n{"a": \n```\n```json\n{"a": 1}\n```', 1.0),
    ('```python\n{"a": 1}\n```', 0.0),  # another language's fence: the whole text is not JSON
    ('{"a": 1', 0.0),
    ("{'a': 1}", 0.0),  # Python, not JSON
    ('{"a": NaN}', 0.0),  # NaN and Infinity are not JSON (RFC 8259)
    ('{"a": -Infinity}', 0.0),
    ('[1, 2]', 0.0),  # top_level = "object" by default
    ("42", 0.0),
    ("", 0.0),
    ('The answer is {"a": 1}', 0.0),  # prose around bare JSON: put it in a fence
])
def test_json_valid(text, expected):
    assert reward("json_valid")([text, [{"role": "assistant", "content": text}]]) == [expected, expected]


@pytest.mark.parametrize(("top_level", "scores"), [
    ("object", [1.0, 0.0, 0.0, 0.0]),
    ("array", [0.0, 1.0, 0.0, 0.0]),
    ("container", [1.0, 1.0, 0.0, 0.0]),
    ("any", [1.0, 1.0, 1.0, 1.0]),
])
def test_top_level_kinds(top_level, scores):
    assert reward("json_valid", top_level=top_level)(['{}', '[]', '"s"', "3.5"]) == scores


def test_extract_methods():
    text = 'x\n```json\n{"a": 1}\n```'
    assert extract_json_text(text, "fence") == '{"a": 1}'
    assert extract_json_text('{"a": 1}', "fence") is None
    assert extract_json_text(text, "whole") == text
    assert reward("json_valid", extract="whole")([text]) == [0.0]
    assert reward("json_valid", extract="fence")(['{"a": 1}']) == [0.0]


def test_schema_as_a_table_or_json_text():
    texts = ['{"name": "Ada"}', '{"name": 3}', '{}', '["Ada"]', "no json"]
    expected = [1.0, 0.0, 0.0, 0.0, 0.0]
    assert reward("json_schema", schema=PERSON)(texts) == expected
    assert reward("json_schema", schema=json.dumps(PERSON), value=2.0)(texts) == [2 * e for e in expected]


def test_schema_per_row_from_a_column():
    fn = reward("json_schema")
    texts = ['{"name": "Ada"}', "[1]", "[1]", "{}", "{}", "{}", "{}"]
    schemas = [PERSON, '{"type": "array"}', {"type": "object"}, None, float("nan"), '{"type": 12}', "not json"]
    # no schema, a pandas gap, an invalid schema, unparseable text: the row does not count
    assert fn(texts, schema=schemas) == [1.0, 1.0, 0.0, None, None, None, None]
    assert reward("json_schema", schema_column="spec")(["[1]"], spec=[{"type": "array"}]) == [1.0]


def test_missing_column_without_a_schema_is_an_error_naming_it():
    with pytest.raises(KeyError, match="column 'schema' is missing"):
        reward("json_schema")(["{}"])


@pytest.mark.parametrize(("params", "message"), [
    ({"schema": {"type": 12}}, "schema is not a valid JSON Schema"),
    ({"schema": "{not json"}, "schema must be a table or JSON text"),
    ({"top_level": "dict"}, "top_level must be one of"),
    ({"extract": "regex"}, "extract must be one of"),
])
def test_bad_parameters_are_one_line_errors(params, message):
    with pytest.raises(ValueError, match=message):
        reward("json_schema", **params)


def test_schema_table_in_a_rewards_toml(tmp_path):
    path = tmp_path / "rewards.toml"
    path.write_text('[rewards.fits]\nuse = "json_schema"\n'
                    'schema = { type = "object", required = ["name"], properties = { name = { type = "string" } } }\n')
    assert load_rewards(str(path)).entries[0].fn(['{"name": "Ada"}', "{}"]) == [1.0, 0.0]
    path.write_text('[rewards.fits]\nuse = "json_schema"\nschema = { type = 12 }\n')
    with pytest.raises(ConfigError, match="rewards.fits.*not a valid JSON Schema"):
        load_rewards(str(path))


HOSTILE = [
    "[" * 200_000 + "]" * 200_000,  # deeper than any parser's recursion
    '{"a": ' * 50_000 + "1" + "}" * 50_000,
    "9" * 90_000,  # over int()'s digit limit
    '{"a": "' + "x" * 200_000 + '"}',  # over max_chars
    "```\n" * 100_000,
    "```json\n" + " \t" * 200_000 + "{}",  # a long blank run after an open fence
    '{"a": "' + "\\" * 60_001 + '"}',
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_scores_wrong_quickly(text):
    start = time.monotonic()
    for fn in (reward("json_valid", top_level="any"), reward("json_schema", schema={"type": "object"})):
        assert fn([text]) == [0.0]
    assert time.monotonic() - start < 2.0


def test_nesting_up_to_max_depth_is_parsed_and_validated():
    nested = "[" * 32 + "]" * 32
    recursive = {"type": "array", "items": {"$ref": "#"}}
    assert nesting_depth(nested, 100) == 32
    assert reward("json_schema", schema=recursive, max_depth=32)([nested]) == [1.0]
    assert reward("json_schema", schema=recursive, max_depth=31)([nested]) == [0.0]
    assert nesting_depth('["[[[", {"k": "]]"}]', 100) == 2  # brackets inside strings do not count


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
_SCHEMAS = st.sampled_from([
    {"type": "object"}, {"type": "array", "items": {"type": "integer"}}, PERSON,
    {"type": "object", "additionalProperties": {"type": ["string", "null"]}}, {"maxItems": 2},
])


@settings(max_examples=150, deadline=None)
@given(value=_JSON, schema=_SCHEMAS, fenced=st.booleans(), indent=st.sampled_from([None, 2]))
def test_agrees_with_jsonschema_on_any_json_value_fenced_or_not(value, schema, fenced, indent):
    text = json.dumps(value, indent=indent)
    if fenced:
        text = f"Sure.\n```json\n{text}\n```\nDone."
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert reward("json_schema", schema=schema)([text]) == [1.0 if valid else 0.0]
    assert reward("json_valid", top_level="any")([text]) == [1.0]
