"""json_schema checks ``"format"`` (jsonschema's FormatChecker with the format-nongpl libraries): one test per
format, the option that turns it off, and a loud error where a format's library is missing."""

from __future__ import annotations

import json

import jsonschema
import pytest
from grpo_rewards_json.rewards import CHECKABLE_FORMATS, unchecked_formats

from grpo_rewards import reward

# format -> (a valid value, an invalid value, the library jsonschema checks it with, None: the standard library)
FORMATS = {
    "email": ("ada@example.org", "not an email", None),
    "idn-email": ("用户@例子.广告", "no at sign", None),
    "date": ("2024-02-29", "2023-02-30", None),
    "date-time": ("2024-02-29T12:30:00Z", "2024-02-29 at noon", "rfc3339_validator"),
    "time": ("12:30:00Z", "25:61:00Z", "rfc3339_validator"),
    "duration": ("P3DT4H", "three days", "isoduration"),
    "uri": ("https://example.org/a?b=c", "example dot org", "rfc3986_validator"),
    "uri-reference": ("../a/b?c", "http://[::1", "rfc3986_validator"),
    "iri": ("https://例え.jp/パス", "例え", "rfc3987_syntax"),
    "iri-reference": ("../パス", "http://[::1", "rfc3987_syntax"),
    "uri-template": ("https://example.org/{id}", "https://example.org/{id", "uri_template"),
    "hostname": ("example.org", "-bad-.example.org", "fqdn"),
    "idn-hostname": ("bücher.example", "xn--a.-", "idna"),
    "ipv4": ("192.168.0.1", "256.1.1.1", None),
    "ipv6": ("2001:db8::1", "2001:::1", None),
    "uuid": ("123e4567-e89b-12d3-a456-426614174000", "123e4567", None),
    "json-pointer": ("/a/b~1c", "a/b", "jsonpointer"),
    "relative-json-pointer": ("1/a", "/a", "jsonpointer"),
    "regex": ("^a+$", "(unclosed", None),
}


def _schema(fmt: str) -> dict:
    return {"type": "object", "required": ["v"], "properties": {"v": {"type": "string", "format": fmt}}}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_format_is_checked(fmt):
    good, bad, library = FORMATS[fmt]
    if library:
        pytest.importorskip(library)
    fn = reward("json_schema", schema=_schema(fmt))
    texts = [json.dumps({"v": good}, ensure_ascii=False), json.dumps({"v": bad}, ensure_ascii=False)]
    assert fn(texts) == [1.0, 0.0]
    assert reward("json_schema", schema=_schema(fmt), check_formats=False)(texts) == [1.0, 1.0]


def test_formats_in_a_schema_column_and_nested_subschemas():
    schema = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string", "format": "email"}]}}
    fn = reward("json_schema")
    assert fn(['[1, "ada@example.org"]', '[1, "nobody"]'], schema=[schema, json.dumps(schema)]) == [1.0, 0.0]


def test_every_format_listed_is_a_format_jsonschema_knows():
    assert {f for f in FORMATS} <= CHECKABLE_FORMATS <= set(jsonschema.FormatChecker.checkers) | {"color"} | set(FORMATS)


def test_a_format_whose_library_is_missing_is_an_error_not_a_pass(monkeypatch):
    without_uri = jsonschema.FormatChecker(formats=["email", "date"])
    assert unchecked_formats(_schema("uri"), without_uri) == ["uri"]
    assert unchecked_formats({"properties": {"format": {"type": "string"}}}, without_uri) == []  # a property named format
    assert unchecked_formats(_schema("my-own-format"), without_uri) == []  # no draft defines it: an annotation
    monkeypatch.setattr(jsonschema.Draft202012Validator, "FORMAT_CHECKER", without_uri)
    with pytest.raises(ValueError, match="format 'uri' cannot be checked: .*format-nongpl.*check_formats = false"):
        reward("json_schema", schema={"$schema": "https://json-schema.org/draft/2020-12/schema", **_schema("uri")})
    fn = reward("json_schema")
    with pytest.raises(ValueError, match="format 'uri' cannot be checked"):
        fn(['{"v": "x"}'], schema=[{"$schema": "https://json-schema.org/draft/2020-12/schema", **_schema("uri")}])
    assert reward("json_schema", schema=_schema("uri"), check_formats=False)(['{"v": "x"}']) == [1.0]
