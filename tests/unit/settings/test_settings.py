"""proxy.settings: precedence of the four sources and one-line errors naming the setting.

Invariant under test: CLI overrides > ``RACKGUARD_*`` environment > TOML file >
defaults, for scalar, list and dict settings alike; every invalid value raises
SettingsError whose message is one line naming the setting; a load leaves no
trace behind (process environment, TOML path).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest

from proxy.settings import (
    KAFKA_MAX_ASSIGNED_ERROR_CODE,
    Settings,
    SettingsError,
    load_settings,
    parse_host_port,
)

TomlWriter = Callable[[str], Path]


@pytest.fixture
def toml(tmp_path: Path) -> TomlWriter:
    counter = iter(range(1000))

    def write(text: str) -> Path:
        path = tmp_path / f"rackguard-{next(counter)}.toml"
        path.write_text(text, encoding="utf-8")
        return path

    return write


def test_defaults_with_empty_environment() -> None:
    s = load_settings(env={})
    assert s.upstream == ()
    assert s.listen_host == "127.0.0.1"
    assert s.advertised == "127.0.0.1"
    assert s.bootstrap_port == 9092
    assert s.min_insync_racks == 1
    assert s.topic_min_insync_racks == {}
    assert s.broker_racks == {}
    assert s.error_mode == "compat"
    assert s.not_enough_racks_code == 1290
    assert s.observe is False
    assert s.fail_open is False


# (setting, TOML line(s), env value, CLI override, value from TOML, from env, from CLI)
PRECEDENCE: list[tuple[str, str, str, Any, Any, Any, Any]] = [
    ("bootstrap_port", "bootstrap_port = 1111", "2222", 3333, 1111, 2222, 3333),
    ("min_insync_racks", "min_insync_racks = 2", "3", 4, 2, 3, 4),
    ("observe", "observe = true", "false", True, True, False, True),
    ("log_level", 'log_level = "debug"', "warning", "error", "DEBUG", "WARNING", "ERROR"),
    (
        "upstream",
        'upstream = ["t1:9092", "t2:9093"]',
        "a:1,b:2",
        "c:3",
        ("t1:9092", "t2:9093"),
        ("a:1", "b:2"),
        ("c:3",),
    ),
    (
        "topic_min_insync_racks",
        "[topic_min_insync_racks]\norders = 3\n",
        "a=2,b=3",
        ["x=4", "y=5"],
        {"orders": 3},
        {"a": 2, "b": 3},
        {"x": 4, "y": 5},
    ),
    (
        "topic_prefix_min_insync_racks",
        'topic_prefix_min_insync_racks = "pay.=2"',
        "pay.=3, audit.=2",
        "pay.eu.=4",
        {"pay.": 2},
        {"pay.": 3, "audit.": 2},
        {"pay.eu.": 4},
    ),
    (
        "broker_racks",
        '[broker_racks]\n1 = "toml-a"\n2 = "toml-b"\n',
        "1=rack-a",
        {3: "cli-c"},
        {1: "toml-a", 2: "toml-b"},
        {1: "rack-a"},
        {3: "cli-c"},
    ),
]


@pytest.mark.parametrize(
    "name, toml_text, env_value, cli_value, from_toml, from_env, from_cli",
    PRECEDENCE,
    ids=[p[0] for p in PRECEDENCE],
)
def test_precedence_cli_over_env_over_toml_over_default(
    toml: TomlWriter,
    name: str,
    toml_text: str,
    env_value: str,
    cli_value: Any,
    from_toml: Any,
    from_env: Any,
    from_cli: Any,
) -> None:
    default = getattr(load_settings(env={}), name)
    # each step must change the value, or the test could not tell the sources apart
    assert default != from_toml != from_env != from_cli
    path = toml(toml_text + "\n")
    env = {f"RACKGUARD_{name.upper()}": env_value}

    assert getattr(load_settings(env={}, config_file=path), name) == from_toml
    assert getattr(load_settings(env=env), name) == from_env
    assert getattr(load_settings(env=env, config_file=path), name) == from_env
    assert getattr(load_settings({name: cli_value}, config_file=path, env=env), name) == from_cli
    assert getattr(load_settings({name: cli_value}, env={}), name) == from_cli
    # a CLI flag that was not given (None) does not hide the lower sources
    assert getattr(load_settings({name: None}, config_file=path, env=env), name) == from_env
    assert getattr(load_settings({name: None}, config_file=path, env={}), name) == from_toml


def test_sources_mix_per_setting(toml: TomlWriter) -> None:
    path = toml('upstream = ["file:1"]\nbootstrap_port = 1000\nmin_insync_racks = 2\n')
    s = load_settings(
        {"min_insync_racks": 3},
        config_file=path,
        env={"RACKGUARD_BOOTSTRAP_PORT": "2000"},
    )
    assert (s.upstream, s.bootstrap_port, s.min_insync_racks) == (("file:1",), 2000, 3)


def test_dict_override_replaces_the_toml_table(toml: TomlWriter) -> None:
    # Regression: pydantic-settings deep-merges dicts across sources, so a dict
    # override used to be merged with the file's table (and hid the environment).
    path = toml('[broker_racks]\n1 = "toml-a"\n2 = "toml-b"\n[topic_min_insync_racks]\na = 3\n')
    s = load_settings(
        {"broker_racks": {3: "cli-c"}, "topic_min_insync_racks": {"b": 2}},
        config_file=path,
        env={},
    )
    assert s.broker_racks == {3: "cli-c"}
    assert s.topic_min_insync_racks == {"b": 2}
    s = load_settings(
        {"broker_racks": {3: "cli-c"}},
        config_file=path,
        env={"RACKGUARD_BROKER_RACKS": "4=env-d"},
    )
    assert s.broker_racks == {3: "cli-c"}


def test_dict_settings_from_toml_string_form(toml: TomlWriter) -> None:
    path = toml('topic_min_insync_racks = "a=2,b=3"\nbroker_racks = "1=rack-a, 2=rack-b"\n')
    s = load_settings(env={}, config_file=path)
    assert s.topic_min_insync_racks == {"a": 2, "b": 3}
    assert s.broker_racks == {1: "rack-a", 2: "rack-b"}


def test_upstream_addresses_parsed() -> None:
    s = load_settings({"upstream": "kafka-1:9092, [::1]:9093"}, env={})
    assert s.upstream_addresses() == [("kafka-1", 9092), ("::1", 9093)]


def test_explicit_env_replaces_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACKGUARD_BOOTSTRAP_PORT", "4444")
    assert load_settings().bootstrap_port == 4444
    assert load_settings(env={}).bootstrap_port == 9092
    before = dict(os.environ)
    load_settings(env={"RACKGUARD_MIN_INSYNC_RACKS": "2", "OTHER": "x"})
    with pytest.raises(SettingsError):
        load_settings(env={"RACKGUARD_MIN_INSYNC_RACKS": "0"})
    assert dict(os.environ) == before


def test_toml_path_does_not_leak_into_the_next_load(
    toml: TomlWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RACKGUARD_BOOTSTRAP_PORT", raising=False)
    good = toml("bootstrap_port = 1234\n")
    assert load_settings(env={}, config_file=good).bootstrap_port == 1234
    assert Settings().bootstrap_port == 9092  # built directly: no file source left behind
    assert load_settings(env={}).bootstrap_port == 9092
    bad = toml("bootstrap_port = \n")
    with pytest.raises(SettingsError):
        load_settings(env={}, config_file=bad)
    assert load_settings(env={}).bootstrap_port == 9092


def test_settings_are_immutable() -> None:
    s = load_settings(env={})
    with pytest.raises(pydantic.ValidationError):
        s.bootstrap_port = 1  # type: ignore[misc]
    assert s.bootstrap_port == 9092


def test_wildcard_listen_host_with_advertised_host_is_fine() -> None:
    s = load_settings({"listen_host": "0.0.0.0", "advertised_host": "proxy.example"}, env={})
    assert s.advertised == "proxy.example"


@pytest.mark.parametrize("code", [KAFKA_MAX_ASSIGNED_ERROR_CODE + 1, 1290, -2, 32767, -32768])
def test_free_error_codes_accepted(code: int) -> None:
    assert load_settings({"not_enough_racks_code": code}, env={}).not_enough_racks_code == code


def _one_line_naming(exc: SettingsError, setting: str) -> None:
    text = str(exc)
    assert text, "empty message"
    assert "\n" not in text and "\r" not in text, text
    assert setting in text, text


# (how, setting, value, name expected in the message)
INVALID: list[tuple[str, str, Any, str]] = [
    ("cli", "bootstrap_port", 70000, "bootstrap_port"),
    ("env", "bootstrap_port", "-1", "bootstrap_port"),
    ("toml", "bootstrap_port", "99999", "bootstrap_port"),
    ("env", "bootstrap_port", "http", "bootstrap_port"),
    ("cli", "broker_port_base", 0, "broker_port_base"),
    ("cli", "min_insync_racks", 0, "min_insync_racks"),
    ("env", "min_insync_racks", "0", "min_insync_racks"),
    ("toml", "min_insync_racks", "0", "min_insync_racks"),
    ("cli", "not_enough_racks_code", 19, "not_enough_racks_code"),
    ("cli", "not_enough_racks_code", -1, "not_enough_racks_code"),
    ("cli", "not_enough_racks_code", KAFKA_MAX_ASSIGNED_ERROR_CODE, "not_enough_racks_code"),
    ("cli", "not_enough_racks_code", 40000, "not_enough_racks_code"),
    ("env", "not_enough_racks_code", "-40000", "not_enough_racks_code"),
    ("cli", "error_mode", "loud", "error_mode"),
    ("cli", "log_level", "chatty", "log_level"),
    ("cli", "upstream", "no-port", "upstream"),
    ("env", "upstream", "a:1,b:99999", "upstream"),
    ("cli", "upstream", "host:0", "upstream"),
    ("cli", "topic_min_insync_racks", "orders=0", "topic_min_insync_racks"),
    ("env", "topic_min_insync_racks", "orders", "topic_min_insync_racks"),
    ("env", "topic_min_insync_racks", "orders=two", "topic_min_insync_racks"),
    ("cli", "topic_prefix_min_insync_racks", "pay.=0", "topic_prefix_min_insync_racks"),
    ("env", "broker_racks", "one=rack-a", "broker_racks"),
    ("env", "broker_racks", "1=", "broker_racks"),
    ("cli", "max_metadata_age_ms", 5, "max_metadata_age_ms"),
    ("cli", "max_frame_size", 10, "max_frame_size"),
    ("cli", "no_such_setting", 1, "no_such_setting"),
    ("toml", "no_such_setting", "1", "no_such_setting"),
]


@pytest.mark.parametrize(
    "how, setting, value, named",
    INVALID,
    ids=[f"{i[0]}-{i[1]}-{i[2]}" for i in INVALID],
)
def test_invalid_values_raise_one_line_naming_the_setting(
    toml: TomlWriter, how: str, setting: str, value: Any, named: str
) -> None:
    with pytest.raises(SettingsError) as info:
        if how == "cli":
            load_settings({setting: value}, env={})
        elif how == "env":
            load_settings(env={f"RACKGUARD_{setting.upper()}": value})
        else:
            load_settings(env={}, config_file=toml(f"{setting} = {value}\n"))
    _one_line_naming(info.value, named)


def test_unknown_rackguard_environment_variable_is_an_error() -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(env={"RACKGUARD_MIN_INSYNC_RACK": "2"})
    _one_line_naming(info.value, "MIN_INSYNC_RACK")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", ""])
def test_wildcard_listen_host_needs_advertised_host(host: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings({"listen_host": host}, env={})
    _one_line_naming(info.value, "advertised_host")


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(SettingsError) as info:
        load_settings(env={}, config_file=missing)
    _one_line_naming(info.value, "config")
    assert str(missing) in str(info.value)


def test_config_path_that_is_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(env={}, config_file=tmp_path)
    _one_line_naming(info.value, "config")


@pytest.mark.parametrize(
    "text",
    ["upstream = [\n", "bootstrap_port = \n", "[broker_racks\n1 = 'a'\n", "= 3\n"],
)
def test_toml_syntax_error(toml: TomlWriter, text: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(env={}, config_file=toml(text))
    _one_line_naming(info.value, "config")


def test_settings_error_is_a_value_error() -> None:
    assert issubclass(SettingsError, ValueError)


def test_broker_port_mapping() -> None:
    s = load_settings({"broker_port_base": 9100, "bootstrap_port": 9103}, env={})
    assert s.broker_port(0) == 9100
    assert s.broker_port(7) == 9107
    with pytest.raises(SettingsError) as info:
        s.broker_port(3)  # collides with the bootstrap port
    _one_line_naming(info.value, "broker_port_base")
    with pytest.raises(SettingsError):
        s.broker_port(70000)


@pytest.mark.parametrize(
    "value, expected",
    [("h:1", ("h", 1)), (" h:65535 ", ("h", 65535)), ("[::1]:9092", ("::1", 9092))],
)
def test_parse_host_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(value) == expected


@pytest.mark.parametrize("value", ["h", "h:", ":1", "h:0", "h:65536", "h:-1", "h:x"])
def test_parse_host_port_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        parse_host_port(value)


def test_settings_class_forbids_unknown_fields() -> None:
    with pytest.raises(pydantic.ValidationError):
        Settings(no_such_setting=1)  # type: ignore[call-arg]
