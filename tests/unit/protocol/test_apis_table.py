"""protocol.apis against Kafka's JSON message schemas (the copies kafka-python ships).

Invariant under test: FLEXIBLE_FROM gives, for every request schema, the first
flexible version Kafka's schema declares (None for "none"), so is_flexible is
right for every valid version; every API key the table knows has a name, and
the names are Kafka's.
"""

from __future__ import annotations

import importlib.resources
from typing import Any

import pytest
from kafka.protocol.schemas import load_json

from protocol.apis import API_NAMES, FLEXIBLE_FROM, ApiKey, api_name, is_flexible

_RESOURCES = "kafka.protocol.schemas.resources"


def _schema_names(suffix: str) -> list[str]:
    files = importlib.resources.files(_RESOURCES).iterdir()
    return sorted(
        f.name.removesuffix(".json")
        for f in files
        if f.name.endswith(f"{suffix}.json") and not f.name.startswith(suffix)
    )


REQUEST_SCHEMAS = _schema_names("Request")
RESPONSE_SCHEMAS = _schema_names("Response")


def _versions(spec: str) -> range:
    """'3-13' / '0' / '2+' (only for flexibleVersions) as a range of versions."""
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


def _flexible_from(schema: dict[str, Any]) -> int | None:
    spec = schema["flexibleVersions"]
    if spec == "none":
        return None
    assert spec.endswith("+"), spec
    return int(spec[:-1])


def test_schemas_are_found() -> None:
    assert len(REQUEST_SCHEMAS) >= 50
    assert "ProduceRequest" in REQUEST_SCHEMAS and "MetadataRequest" in REQUEST_SCHEMAS
    assert "RequestHeader" not in REQUEST_SCHEMAS


@pytest.mark.parametrize("schema_name", REQUEST_SCHEMAS)
def test_flexible_from_agrees_with_request_schema(schema_name: str) -> None:
    schema = load_json(schema_name)
    key = schema["apiKey"]
    assert schema["type"] == "request"
    assert key in FLEXIBLE_FROM, f"{schema_name} (api key {key}) missing from FLEXIBLE_FROM"
    expected = _flexible_from(schema)
    assert FLEXIBLE_FROM[key] == expected
    for version in _versions(schema["validVersions"]):
        assert is_flexible(key, version) == (expected is not None and version >= expected), (
            schema_name,
            version,
        )


@pytest.mark.parametrize("schema_name", REQUEST_SCHEMAS)
def test_api_name_is_kafkas(schema_name: str) -> None:
    schema = load_json(schema_name)
    assert API_NAMES[schema["apiKey"]] == schema_name.removesuffix("Request")
    assert api_name(schema["apiKey"]) == schema_name.removesuffix("Request")


@pytest.mark.parametrize("schema_name", RESPONSE_SCHEMAS)
def test_responses_are_flexible_from_the_same_version(schema_name: str) -> None:
    """The proxy derives response header versions from the same table."""
    schema = load_json(schema_name)
    key = schema["apiKey"]
    if key not in FLEXIBLE_FROM:
        pytest.skip(f"api key {key} not in the table")
    assert FLEXIBLE_FROM[key] == _flexible_from(schema)


def test_every_flexible_entry_has_a_name() -> None:
    missing = sorted(set(FLEXIBLE_FROM) - set(API_NAMES))
    assert not missing


def test_every_schema_key_in_the_table_has_a_schema() -> None:
    """No entry in FLEXIBLE_FROM was invented: each has a request schema to check it by."""
    schema_keys = {load_json(name)["apiKey"] for name in REQUEST_SCHEMAS}
    assert not set(FLEXIBLE_FROM) - schema_keys


def test_api_key_enum_matches_names() -> None:
    for member in ApiKey:
        expected = "".join(part.capitalize() for part in member.name.split("_"))
        assert API_NAMES[member.value] == expected


def test_api_names_are_contiguous_and_unique() -> None:
    assert sorted(API_NAMES) == list(range(len(API_NAMES)))
    assert len(set(API_NAMES.values())) == len(API_NAMES)


def test_unknown_api() -> None:
    assert api_name(9999) == "Unknown(9999)"
    assert api_name(-1) == "Unknown(-1)"
    assert is_flexible(9999, 100) is False
    # a key known by name but absent from FLEXIBLE_FROM is never flexible
    assert 40 in API_NAMES and 40 not in FLEXIBLE_FROM
    assert is_flexible(40, 100) is False


@pytest.mark.parametrize(
    "key, version, flexible",
    [(0, 8, False), (0, 9, True), (3, 8, False), (3, 9, True), (3, 13, True), (18, 2, False),
     (18, 3, True), (17, 1, False), (47, 0, False), (60, 0, True)],
)
def test_is_flexible_spot_checks(key: int, version: int, flexible: bool) -> None:
    assert is_flexible(key, version) is flexible
